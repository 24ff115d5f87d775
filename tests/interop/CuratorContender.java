// An Apache Curator lock contender for zklock's interoperability tests
// (tests/lock_interop.rs compiles and runs it; it is not part of the crate).
//
// usage: java CuratorContender CONNECT LOCK_PATH MODE ITERATIONS BEHAVIOUR BASE NAME
//        java CuratorContender --version   (prints the Curator recipes' version)
//
//   MODE       mutex (InterProcessMutex), read or write (the two sides of
//              InterProcessReadWriteLock)
//   BEHAVIOUR  rmw[:MS]  acquire, run the critical section (holding MS ms),
//                        release; ITERATIONS times
//              step      like rmw, but wait for a line on stdin before
//                        each acquisition
//              hold      acquire, run the critical section, print ACQ, wait
//                        for a line on stdin, release
//   BASE       the znode under which the shared test state lives:
//              BASE/counter  incremented by exclusive holders (must exist)
//              BASE/inside   EPHEMERAL while an exclusive holder is inside
//              BASE/readers  one EPHEMERAL child per reader inside
//              BASE/log      one PERSISTENT_SEQUENTIAL entry per acquisition
//
// Output lines (stdout): READY name, ACQ name node nanos, REL name nanos,
// DONE name count, and VIOLATION name detail (then exit status 2).
// Any other failure prints a stack trace and exits with status 1.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorContender {
    private final CuratorFramework client;
    private final String lockPath;
    private final String base;
    private final String name;
    private final boolean reader;
    private final BufferedReader stdin =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    // The version Maven recorded in the recipes jar on the classpath (the
    // Debian jars have none in their manifests), or "unknown".
    private static String curatorVersion() throws IOException {
        String properties = "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties";
        try (InputStream in = InterProcessMutex.class.getResourceAsStream(properties)) {
            if (in == null) {
                return "unknown";
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        }
    }

    private CuratorContender(CuratorFramework client, String lockPath, String base, String name,
            boolean reader) {
        this.client = client;
        this.lockPath = lockPath;
        this.base = base;
        this.name = name;
        this.reader = reader;
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 1 && args[0].equals("--version")) {
            System.out.println(curatorVersion());
            return;
        }
        if (args.length != 7) {
            System.err.println("usage: CuratorContender CONNECT LOCK_PATH mutex|read|write "
                    + "ITERATIONS rmw[:MS]|step|hold BASE NAME");
            System.exit(64);
        }
        String connect = args[0];
        String lockPath = args[1];
        String mode = args[2];
        int iterations = Integer.parseInt(args[3]);
        String behaviour = args[4];
        String base = args[5];
        String name = args[6];

        exitWithParent();
        CuratorFramework client = CuratorFrameworkFactory.newClient(
                connect, 4000, 4000, new RetryNTimes(3, 100));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("not connected to " + connect + " within 30 s");
        }
        InterProcessLock lock;
        switch (mode) {
            case "mutex":
                lock = new InterProcessMutex(client, lockPath);
                break;
            case "read":
                lock = new InterProcessReadWriteLock(client, lockPath).readLock();
                break;
            case "write":
                lock = new InterProcessReadWriteLock(client, lockPath).writeLock();
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + mode);
        }
        CuratorContender me = new CuratorContender(client, lockPath, base, name, mode.equals("read"));
        say("READY " + name);
        for (int i = 0; i < iterations; i++) {
            if (behaviour.equals("step")) {
                me.waitForLine();
            }
            lock.acquire();
            String node = me.ownNode();
            me.enter(i, node);
            say("ACQ " + name + " " + node + " " + System.nanoTime());
            if (behaviour.equals("hold")) {
                me.waitForLine();
            } else if (behaviour.startsWith("rmw:")) {
                Thread.sleep(Long.parseLong(behaviour.substring(4)));
            } else if (!behaviour.equals("rmw") && !behaviour.equals("step")) {
                throw new IllegalArgumentException("unknown behaviour " + behaviour);
            }
            me.exit(i);
            lock.release();
            say("REL " + name + " " + System.nanoTime());
        }
        say("DONE " + name + " " + iterations);
        client.close();
        System.exit(0);
    }

    /** Exits if the test that started this process goes away without killing it. */
    private static void exitWithParent() {
        ProcessHandle parent = ProcessHandle.current().parent().orElse(null);
        if (parent == null) {
            return;
        }
        Thread watchdog = new Thread(() -> {
            while (parent.isAlive()) {
                try {
                    Thread.sleep(500);
                } catch (InterruptedException e) {
                    return;
                }
            }
            System.exit(3);
        }, "parent-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private void violation(String detail) {
        say("VIOLATION " + name + " " + detail);
        System.exit(2);
    }

    private void waitForLine() throws Exception {
        if (stdin.readLine() == null) {
            throw new IllegalStateException("stdin closed");
        }
    }

    /** The lock node this session owns (its only ephemeral child of the lock path). */
    private String ownNode() throws Exception {
        long session = client.getZookeeperClient().getZooKeeper().getSessionId();
        List<String> children = client.getChildren().forPath(lockPath);
        for (String child : children) {
            Stat stat = client.checkExists().forPath(lockPath + "/" + child);
            if (stat != null && stat.getEphemeralOwner() == session) {
                return child;
            }
        }
        throw new IllegalStateException("holding the lock, but no node of ours under " + lockPath);
    }

    private int childCount(String path) throws Exception {
        try {
            return client.getChildren().forPath(path).size();
        } catch (KeeperException.NoNodeException e) {
            return 0;
        }
    }

    /** Marks this holder inside, checks that nobody it excludes is, and logs the entry. */
    private void enter(int iteration, String node) throws Exception {
        if (reader) {
            client.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL)
                    .forPath(base + "/readers/" + name + "-" + iteration);
            if (client.checkExists().forPath(base + "/inside") != null) {
                violation("reader entered while an exclusive holder is inside");
            }
            client.getData().forPath(base + "/counter");
            log(node);
            return;
        }
        try {
            client.create().withMode(CreateMode.EPHEMERAL)
                    .forPath(base + "/inside", name.getBytes(StandardCharsets.UTF_8));
        } catch (KeeperException.NodeExistsException e) {
            byte[] holder = client.getData().forPath(base + "/inside");
            violation("entered while " + new String(holder, StandardCharsets.UTF_8) + " is inside");
        }
        int readers = childCount(base + "/readers");
        if (readers > 0) {
            violation("entered while " + readers + " readers are inside");
        }
        byte[] data = client.getData().forPath(base + "/counter");
        long value = Long.parseLong(new String(data, StandardCharsets.UTF_8).trim());
        client.setData().forPath(base + "/counter",
                Long.toString(value + 1).getBytes(StandardCharsets.UTF_8));
        log(node);
    }

    /** Appends "NAME NODE" to the acquisition log. */
    private void log(String node) throws Exception {
        client.create().creatingParentsIfNeeded().withMode(CreateMode.PERSISTENT_SEQUENTIAL)
                .forPath(base + "/log/entry-", (name + " " + node).getBytes(StandardCharsets.UTF_8));
    }

    /**
     * Leaves the critical section (before the lock is released), checking on
     * the way out too: an overlap in which the other side entered after this
     * one's check would otherwise go unseen.
     */
    private void exit(int iteration) throws Exception {
        if (reader) {
            if (client.checkExists().forPath(base + "/inside") != null) {
                violation("an exclusive holder entered while reader " + name + " was inside");
            }
            client.delete().forPath(base + "/readers/" + name + "-" + iteration);
        } else {
            int readers = childCount(base + "/readers");
            if (readers > 0) {
                violation(readers + " readers entered while " + name + " was inside");
            }
            client.delete().forPath(base + "/inside");
        }
    }
}
