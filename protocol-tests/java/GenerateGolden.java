// Golden vectors for zklock's jute codec, written by the official ZooKeeper
// jute classes (Debian's zookeeper.jar and zookeeper-jute.jar).
//
// Usage: java -cp <jars>:<classes> GenerateGolden <output-dir>
//
// Each case becomes <output-dir>/<case>.bin holding the raw record bytes, with
// no frame length prefix. The output is deterministic, so regenerating into a
// fresh directory and comparing with the committed fixtures detects drift; see
// regenerate.sh. The Rust side of every case lives in protocol-tests/tests/.
//
// Values are chosen for coverage: null versus empty buffers, strings and
// vectors; the extremes of every integer type; non-ASCII paths; every enum
// value the codec knows; and multi records mixing every op and result type.

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeSet;

import org.apache.jute.BinaryOutputArchive;
import org.apache.jute.Record;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.MultiOperationRecord;
import org.apache.zookeeper.MultiResponse;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.data.Stat;
import org.apache.zookeeper.proto.AddWatchRequest;
import org.apache.zookeeper.proto.AuthPacket;
import org.apache.zookeeper.proto.CheckVersionRequest;
import org.apache.zookeeper.proto.CheckWatchesRequest;
import org.apache.zookeeper.proto.ConnectRequest;
import org.apache.zookeeper.proto.ConnectResponse;
import org.apache.zookeeper.proto.Create2Response;
import org.apache.zookeeper.proto.CreateRequest;
import org.apache.zookeeper.proto.CreateResponse;
import org.apache.zookeeper.proto.CreateTTLRequest;
import org.apache.zookeeper.proto.DeleteRequest;
import org.apache.zookeeper.proto.ErrorResponse;
import org.apache.zookeeper.proto.ExistsRequest;
import org.apache.zookeeper.proto.ExistsResponse;
import org.apache.zookeeper.proto.GetACLRequest;
import org.apache.zookeeper.proto.GetACLResponse;
import org.apache.zookeeper.proto.GetAllChildrenNumberRequest;
import org.apache.zookeeper.proto.GetAllChildrenNumberResponse;
import org.apache.zookeeper.proto.GetChildren2Request;
import org.apache.zookeeper.proto.GetChildren2Response;
import org.apache.zookeeper.proto.GetChildrenRequest;
import org.apache.zookeeper.proto.GetChildrenResponse;
import org.apache.zookeeper.proto.GetDataRequest;
import org.apache.zookeeper.proto.GetDataResponse;
import org.apache.zookeeper.proto.GetEphemeralsRequest;
import org.apache.zookeeper.proto.GetEphemeralsResponse;
import org.apache.zookeeper.proto.MultiHeader;
import org.apache.zookeeper.proto.RemoveWatchesRequest;
import org.apache.zookeeper.proto.ReplyHeader;
import org.apache.zookeeper.proto.RequestHeader;
import org.apache.zookeeper.proto.SetACLRequest;
import org.apache.zookeeper.proto.SetACLResponse;
import org.apache.zookeeper.proto.SetDataRequest;
import org.apache.zookeeper.proto.SetDataResponse;
import org.apache.zookeeper.proto.SetWatches;
import org.apache.zookeeper.proto.SetWatches2;
import org.apache.zookeeper.proto.SyncRequest;
import org.apache.zookeeper.proto.SyncResponse;
import org.apache.zookeeper.proto.WatcherEvent;
import org.apache.zookeeper.proto.WhoAmIResponse;

public final class GenerateGolden {

    // ---- Shared values. The Rust tests build the same ones. ----

    /** A non-ASCII path, Basic Multilingual Plane only (paths may not hold surrogates). */
    static final String UNICODE_PATH = "/ünï/路径/κλειδί";
    static final String LOCK_PATH = "/app/locks/lock-0000000042";
    static final long SESSION_ID = 0x1000abcdef0001L;

    /** An ordinary persistent node. */
    static Stat stat() {
        return new Stat(0x100000002L, 0x100000005L, 1700000000123L, 1700000005456L,
                3, 7, 1, 0L, 11, 2, 0x100000009L);
    }

    /** An ephemeral node owned by SESSION_ID. */
    static Stat ephemeralStat() {
        return new Stat(0x200000010L, 0x200000010L, 1700000100000L, 1700000100000L,
                0, 0, 0, SESSION_ID, 0, 0, 0x200000010L);
    }

    /** Every field at an extreme; ephemeralOwner Long.MIN_VALUE marks a container. */
    static Stat extremeStat() {
        return new Stat(Long.MIN_VALUE, Long.MAX_VALUE, -1L, 0L,
                Integer.MIN_VALUE, Integer.MAX_VALUE, -1, Long.MIN_VALUE,
                Integer.MIN_VALUE, Integer.MAX_VALUE, -1L);
    }

    /** A TTL node: ephemeralOwner is 0xFF00000000000000 | ttl. */
    static Stat ttlStat() {
        return new Stat(0x300000001L, 0x300000001L, 1700000200000L, 1700000200000L,
                0, 0, 0, 0xFF00000000000000L | 60000L, 5, 0, 0x300000001L);
    }

    static List<ACL> openAcl() {
        return list(new ACL(31, new Id("world", "anyone")));
    }

    static List<ACL> creatorAcl() {
        return list(new ACL(31, new Id("auth", "")));
    }

    static List<ACL> mixedAcl() {
        return list(
                new ACL(1, new Id("world", "anyone")),
                new ACL(31, new Id("digest", "alice:tSkHf9vbvtxHKu8fJ3W1AGBpSL0=")),
                new ACL(3, new Id("ip", "10.0.0.0/8")),
                new ACL(0, new Id("sasl", "bob@EXAMPLE.COM")));
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Bytes 0, 1, ..., n-1 (wrapping at 256). */
    static byte[] counting(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) i;
        }
        return b;
    }

    /** A mutable list that may hold nulls. */
    @SafeVarargs
    static <T> List<T> list(T... items) {
        return new ArrayList<>(Arrays.asList(items));
    }

    // ---- Output ----

    interface Body {
        void write(BinaryOutputArchive a) throws IOException;
    }

    private final Path outDir;
    private final TreeSet<String> names = new TreeSet<>();

    GenerateGolden(Path outDir) {
        this.outDir = outDir;
    }

    void raw(String name, Body body) throws IOException {
        if (!name.matches("[a-z0-9_]+")) {
            throw new IllegalArgumentException("bad case name " + name);
        }
        if (!names.add(name)) {
            throw new IllegalArgumentException("duplicate case " + name);
        }
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        body.write(BinaryOutputArchive.getArchive(bytes));
        Files.write(outDir.resolve(name + ".bin"), bytes.toByteArray());
    }

    void record(String name, Record r) throws IOException {
        raw(name, a -> r.serialize(a, name));
    }

    /** The client appends readOnly by hand after the 3.8 jute record. */
    void connectRequest(String name, ConnectRequest r, boolean readOnly) throws IOException {
        raw(name, a -> {
            r.serialize(a, "connect");
            a.writeBool(readOnly, "readOnly");
        });
    }

    /** The server appends readOnly by hand after the 3.8 jute record. */
    void connectResponse(String name, ConnectResponse r, boolean readOnly) throws IOException {
        raw(name, a -> {
            r.serialize(a, "connect");
            a.writeBool(readOnly, "readOnly");
        });
    }

    // ---- Cases ----

    void handshake() throws IOException {
        byte[] zeros = new byte[16];
        byte[] passwd = counting(16);
        connectRequest("connect_request_new_session",
                new ConnectRequest(0, 0L, 30000, 0L, zeros), false);
        connectRequest("connect_request_resume_read_only",
                new ConnectRequest(0, 0x10000002aL, 40000, SESSION_ID, passwd), true);
        connectRequest("connect_request_extremes",
                new ConnectRequest(Integer.MIN_VALUE, Long.MIN_VALUE, Integer.MIN_VALUE, -1L,
                        new byte[0]), false);
        // A pre-3.4 client: the jute record alone, without the readOnly byte.
        record("connect_request_without_read_only",
                new ConnectRequest(0, 5L, 10000, 0L, zeros));
        connectRequest("connect_request_null_passwd",
                new ConnectRequest(0, 0L, 30000, 0L, null), false);

        connectResponse("connect_response_new_session",
                new ConnectResponse(0, 30000, SESSION_ID, passwd), false);
        connectResponse("connect_response_read_only",
                new ConnectResponse(0, 4000, SESSION_ID, passwd), true);
        connectResponse("connect_response_expired",
                new ConnectResponse(0, 0, 0L, zeros), false);
        connectResponse("connect_response_extremes",
                new ConnectResponse(Integer.MAX_VALUE, Integer.MIN_VALUE, Long.MIN_VALUE,
                        new byte[0]), false);
        // The reply to a pre-3.4 client: no readOnly byte.
        record("connect_response_without_read_only",
                new ConnectResponse(0, 30000, SESSION_ID, passwd));
        connectResponse("connect_response_null_passwd",
                new ConnectResponse(0, 30000, SESSION_ID, null), false);
    }

    void headers() throws IOException {
        record("request_header", new RequestHeader(1, 4));
        // Header-only request frames.
        record("request_header_ping", new RequestHeader(-2, 11));
        record("request_header_close_session", new RequestHeader(7, -11));
        record("request_header_who_am_i", new RequestHeader(9, 107));
        record("request_header_auth", new RequestHeader(-4, 100));
        record("request_header_set_watches", new RequestHeader(-8, 101));
        record("request_header_extremes", new RequestHeader(Integer.MIN_VALUE, Integer.MAX_VALUE));

        record("reply_header", new ReplyHeader(1, 0x100000005L, 0));
        record("reply_header_notification", new ReplyHeader(-1, -1L, 0));
        record("reply_header_ping", new ReplyHeader(-2, 0x100000009L, 0));
        record("reply_header_no_node", new ReplyHeader(5, 0x100000009L, -101));
        record("reply_header_extremes",
                new ReplyHeader(Integer.MAX_VALUE, Long.MIN_VALUE, Integer.MIN_VALUE));
    }

    void data() throws IOException {
        record("stat", stat());
        record("stat_zero", new Stat(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
        record("stat_ephemeral", ephemeralStat());
        record("stat_extremes", extremeStat());
        record("stat_ttl", ttlStat());

        record("id_world_anyone", new Id("world", "anyone"));
        record("id_empty", new Id("", ""));
        record("id_non_ascii", new Id("digest", "ünï:路径κλειδί"));
        record("id_null_scheme", new Id(null, "anyone"));
        record("id_null_id", new Id("world", null));

        record("acl_open", new ACL(31, new Id("world", "anyone")));
        record("acl_digest", new ACL(3, new Id("digest", "alice:tSkHf9vbvtxHKu8fJ3W1AGBpSL0=")));
        record("acl_extreme_perms", new ACL(Integer.MIN_VALUE, new Id("ip", "127.0.0.1")));
        record("acl_negative_perms", new ACL(-1, new Id("auth", "")));
        // U+1F600 outside the BMP: the Java writer emits each UTF-16 unit on its
        // own, giving the 6-byte CESU-8 form rather than 4-byte UTF-8.
        record("acl_supplementary_cesu8", new ACL(1, new Id("digest", "smile\uD83D\uDE00:x")));

        record("client_info", new ClientInfo("digest", "alice"));
        record("client_info_empty", new ClientInfo("", ""));
        record("client_info_non_ascii", new ClientInfo("sasl", "ünï@路径"));
        record("client_info_null_user", new ClientInfo("ip", null));
    }

    void create() throws IOException {
        record("create_request_persistent",
                new CreateRequest("/app/config", utf8("hello"), openAcl(), 0));
        record("create_request_ephemeral",
                new CreateRequest("/app/nodes/n1", utf8("{}"), openAcl(), 1));
        record("create_request_persistent_sequential",
                new CreateRequest("/app/queue/item-", new byte[0], creatorAcl(), 2));
        record("create_request_ephemeral_sequential",
                new CreateRequest("/app/locks/lock-", new byte[0], openAcl(), 3));
        // createContainer sends a CreateRequest with the container flag.
        record("create_request_container",
                new CreateRequest("/app/locks", null, openAcl(), 4));
        record("create_request_null_data",
                new CreateRequest("/app/empty", null, openAcl(), 0));
        record("create_request_binary_data",
                new CreateRequest("/app/bin", counting(300), openAcl(), 0));
        record("create_request_empty_acl",
                new CreateRequest("/app/x", new byte[0], list(), 0));
        record("create_request_unicode",
                new CreateRequest(UNICODE_PATH, utf8("значение"), mixedAcl(), 0));
        record("create_request_null_path",
                new CreateRequest(null, new byte[0], openAcl(), 0));
        record("create_request_null_acl",
                new CreateRequest("/app/x", new byte[0], null, 0));
        record("create_request_unknown_flags",
                new CreateRequest("/app/x", new byte[0], openAcl(), 7));

        record("create_ttl_request",
                new CreateTTLRequest("/app/ttl", utf8("t"), openAcl(), 5, 60000L));
        record("create_ttl_request_sequential_max_ttl",
                new CreateTTLRequest("/app/ttl-", null, creatorAcl(), 6, 0xFFFFFFFFFFL));
        record("create_ttl_request_extreme_ttl",
                new CreateTTLRequest(UNICODE_PATH, new byte[0], list(), 5, Long.MIN_VALUE));

        record("create_response", new CreateResponse(LOCK_PATH));
        record("create_response_unicode", new CreateResponse(UNICODE_PATH));
        record("create_response_empty_path", new CreateResponse(""));
        record("create_response_null_path", new CreateResponse(null));
        record("create2_response", new Create2Response(LOCK_PATH, ephemeralStat()));
        record("create2_response_container", new Create2Response("/app/locks", extremeStat()));
        record("create2_response_ttl", new Create2Response("/app/ttl", ttlStat()));
    }

    void nodeOps() throws IOException {
        record("delete_request", new DeleteRequest("/app/config", 3));
        record("delete_request_any_version", new DeleteRequest(UNICODE_PATH, -1));
        record("delete_request_min_version", new DeleteRequest("/a", Integer.MIN_VALUE));

        record("exists_request", new ExistsRequest("/app/config", false));
        record("exists_request_watch", new ExistsRequest(UNICODE_PATH, true));
        record("exists_response", new ExistsResponse(stat()));

        record("get_data_request", new GetDataRequest("/app/config", false));
        record("get_data_request_watch", new GetDataRequest(UNICODE_PATH, true));
        record("get_data_response", new GetDataResponse(utf8("hello world"), stat()));
        record("get_data_response_null_data", new GetDataResponse(null, stat()));
        record("get_data_response_empty_data", new GetDataResponse(new byte[0], stat()));
        record("get_data_response_binary", new GetDataResponse(counting(256), extremeStat()));

        record("set_data_request", new SetDataRequest("/app/config", utf8("v2"), 3));
        record("set_data_request_null_data", new SetDataRequest("/app/config", null, -1));
        record("set_data_request_empty_data",
                new SetDataRequest(UNICODE_PATH, new byte[0], Integer.MAX_VALUE));
        record("set_data_response", new SetDataResponse(stat()));

        record("get_acl_request", new GetACLRequest("/app/config"));
        record("get_acl_response", new GetACLResponse(mixedAcl(), stat()));
        record("get_acl_response_empty", new GetACLResponse(list(), stat()));
        record("get_acl_response_null_acl", new GetACLResponse(null, stat()));

        record("set_acl_request", new SetACLRequest(UNICODE_PATH, mixedAcl(), 1));
        record("set_acl_request_null_acl", new SetACLRequest("/app/config", null, -1));
        record("set_acl_response", new SetACLResponse(stat()));

        record("get_children_request", new GetChildrenRequest("/app/locks", true));
        // getChildren2 has its own jute class with the same layout.
        record("get_children2_request", new GetChildren2Request(UNICODE_PATH, false));
        record("get_children_response",
                new GetChildrenResponse(list("lock-0000000001", "κλειδί", "路径", "")));
        record("get_children_response_empty", new GetChildrenResponse(list()));
        record("get_children_response_null", new GetChildrenResponse(null));
        record("get_children_response_null_element",
                new GetChildrenResponse(list("a", null, "b")));
        record("get_children2_response",
                new GetChildren2Response(list("lock-0000000001", "lock-0000000002"), stat()));
        record("get_children2_response_empty", new GetChildren2Response(list(), extremeStat()));
        record("get_children2_response_null", new GetChildren2Response(null, stat()));

        record("sync_request", new SyncRequest("/app"));
        record("sync_response", new SyncResponse(UNICODE_PATH));

        record("check_version_request", new CheckVersionRequest("/app/config", 3));
        record("check_version_request_min_version",
                new CheckVersionRequest(UNICODE_PATH, Integer.MIN_VALUE));

        record("get_ephemerals_request", new GetEphemeralsRequest("/app/locks/"));
        record("get_ephemerals_request_empty_prefix", new GetEphemeralsRequest(""));
        record("get_ephemerals_response",
                new GetEphemeralsResponse(list("/app/locks/lock-0000000042", UNICODE_PATH)));
        record("get_ephemerals_response_empty", new GetEphemeralsResponse(list()));

        record("get_all_children_number_request", new GetAllChildrenNumberRequest("/"));
        record("get_all_children_number_response", new GetAllChildrenNumberResponse(12345));
        record("get_all_children_number_response_min",
                new GetAllChildrenNumberResponse(Integer.MIN_VALUE));
    }

    void sessionAndWatches() throws IOException {
        record("auth_packet", new AuthPacket(0, "digest", utf8("alice:secret")));
        record("auth_packet_empty", new AuthPacket(-1, "", new byte[0]));
        record("auth_packet_null_auth", new AuthPacket(0, "digest", null));
        record("auth_packet_null_scheme", new AuthPacket(0, null, utf8("x")));

        record("who_am_i_response", new WhoAmIResponse(list(
                new ClientInfo("ip", "127.0.0.1"), new ClientInfo("digest", "alice"))));
        record("who_am_i_response_empty", new WhoAmIResponse(list()));
        record("who_am_i_response_null", new WhoAmIResponse(null));

        record("set_watches", new SetWatches(0x100000009L,
                list("/app/config", UNICODE_PATH), list("/app/missing"), list("/app/locks")));
        record("set_watches_empty", new SetWatches(Long.MIN_VALUE, list(), list(), list()));
        record("set_watches_null_list", new SetWatches(0L, list(), null, list()));
        record("set_watches2", new SetWatches2(0x100000009L,
                list("/d"), list("/e1", "/e2"), list("/c"), list("/p"), list(UNICODE_PATH, "/r")));
        record("set_watches2_empty", new SetWatches2(-1L, list(), list(), list(), list(), list()));
        record("set_watches2_null_list",
                new SetWatches2(0L, list(), list(), list(), list(), null));

        record("add_watch_request_persistent", new AddWatchRequest("/app/config", 0));
        record("add_watch_request_persistent_recursive", new AddWatchRequest(UNICODE_PATH, 1));
        record("add_watch_request_unknown_mode", new AddWatchRequest("/app", 2));

        String[] watcherTypes = {"children", "data", "any", "persistent", "persistent_recursive"};
        for (int i = 0; i < watcherTypes.length; i++) {
            record("remove_watches_request_" + watcherTypes[i],
                    new RemoveWatchesRequest("/app/config", i + 1));
        }
        // checkWatches has its own jute class with the same layout.
        record("check_watches_request_children", new CheckWatchesRequest(UNICODE_PATH, 1));
        record("check_watches_request_data", new CheckWatchesRequest("/app/config", 2));
        record("check_watches_request_any", new CheckWatchesRequest("/app/config", 3));

        record("error_response_ok", new ErrorResponse(0));
        record("error_response_no_node", new ErrorResponse(-101));
        record("error_response_min", new ErrorResponse(Integer.MIN_VALUE));

        // Notifications: every event type a server sends, state SyncConnected.
        record("watcher_event_node_created", new WatcherEvent(1, 3, "/app/config"));
        record("watcher_event_node_deleted", new WatcherEvent(2, 3, LOCK_PATH));
        record("watcher_event_node_data_changed", new WatcherEvent(3, 3, UNICODE_PATH));
        record("watcher_event_node_children_changed", new WatcherEvent(4, 3, "/app/locks"));
        // Client-local values, with negative codes.
        record("watcher_event_none_expired", new WatcherEvent(-1, -112, ""));
        record("watcher_event_persistent_watch_removed_closed", new WatcherEvent(7, 7, "/p"));
        record("watcher_event_null_path", new WatcherEvent(1, 3, null));
        record("watcher_event_unknown_state", new WatcherEvent(1, 2, "/app"));
    }

    void multi() throws IOException {
        record("multi_header", new MultiHeader(1, false, -1));
        record("multi_header_terminator", new MultiHeader(-1, true, -1));
        record("multi_header_error", new MultiHeader(-1, false, -101));

        // Every write op, built through the public Op API as the Java client does.
        MultiOperationRecord writes = new MultiOperationRecord();
        writes.add(Op.create("/app/config", utf8("hello"), openAcl(), CreateMode.PERSISTENT));
        writes.add(Op.create("/app/locks/lock-", null, creatorAcl(),
                CreateMode.EPHEMERAL_SEQUENTIAL));
        writes.add(Op.create("/app/locks", new byte[0], openAcl(), CreateMode.CONTAINER));
        writes.add(Op.create("/app/ttl", utf8("t"), mixedAcl(),
                CreateMode.PERSISTENT_WITH_TTL, 60000L));
        writes.add(Op.delete(UNICODE_PATH, -1));
        writes.add(Op.setData("/app/config", utf8("v2"), 3));
        writes.add(Op.setData("/app/empty", null, -1));
        writes.add(Op.check("/app", Integer.MIN_VALUE));
        record("multi_request_every_write_op", writes);

        MultiOperationRecord reads = new MultiOperationRecord();
        reads.add(Op.getData("/app/config"));
        reads.add(Op.getChildren(UNICODE_PATH));
        reads.add(Op.getData("/app/missing"));
        record("multi_request_read", reads);

        record("multi_request_empty", new MultiOperationRecord());

        MultiOperationRecord single = new MultiOperationRecord();
        single.add(Op.check(UNICODE_PATH, 0));
        record("multi_request_single_check", single);

        // The Op API never puts create2 (15) in a multi, but the record format
        // allows it; assembled by hand from the official header and request.
        raw("multi_request_create2_by_hand", a -> {
            new MultiHeader(15, false, -1).serialize(a, "header");
            new CreateRequest("/app/c2", utf8("x"), openAcl(), 0).serialize(a, "op");
            new MultiHeader(-1, true, -1).serialize(a, "header");
        });

        // Every result type, in one response.
        MultiResponse every = new MultiResponse();
        every.add(new OpResult.CreateResult("/app/config"));
        every.add(new OpResult.CreateResult("/app/locks", extremeStat()));
        every.add(new OpResult.DeleteResult());
        every.add(new OpResult.SetDataResult(stat()));
        every.add(new OpResult.CheckResult());
        every.add(new OpResult.GetDataResult(utf8("hello"), stat()));
        every.add(new OpResult.GetChildrenResult(list("a", "κλειδί")));
        every.add(new OpResult.ErrorResult(-101));
        record("multi_response_every_result", every);

        // A successful multi for the write ops above.
        MultiResponse ok = new MultiResponse();
        ok.add(new OpResult.CreateResult("/app/config"));
        ok.add(new OpResult.CreateResult("/app/locks/lock-0000000042"));
        ok.add(new OpResult.CreateResult("/app/locks", extremeStat()));
        ok.add(new OpResult.CreateResult("/app/ttl", ttlStat()));
        ok.add(new OpResult.DeleteResult());
        ok.add(new OpResult.SetDataResult(stat()));
        ok.add(new OpResult.SetDataResult(ephemeralStat()));
        ok.add(new OpResult.CheckResult());
        record("multi_response_writes_ok", ok);

        // A failed multi: ops before the failing one report 0, the failing op
        // its own code (NoNode), the ops after it RuntimeInconsistency.
        MultiResponse failed = new MultiResponse();
        failed.add(new OpResult.ErrorResult(0));
        failed.add(new OpResult.ErrorResult(0));
        failed.add(new OpResult.ErrorResult(-101));
        failed.add(new OpResult.ErrorResult(-2));
        failed.add(new OpResult.ErrorResult(-2));
        record("multi_response_failed", failed);

        // multiRead: each op succeeds or fails on its own.
        MultiResponse read = new MultiResponse();
        read.add(new OpResult.GetDataResult(null, stat()));
        read.add(new OpResult.GetChildrenResult(list()));
        read.add(new OpResult.ErrorResult(-101));
        record("multi_response_read", read);

        record("multi_response_empty", new MultiResponse());
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 1) {
            System.err.println("usage: GenerateGolden <output-dir>");
            System.exit(2);
        }
        Path out = Paths.get(args[0]);
        Files.createDirectories(out);
        GenerateGolden g = new GenerateGolden(out);
        g.handshake();
        g.headers();
        g.data();
        g.create();
        g.nodeOps();
        g.sessionAndWatches();
        g.multi();
        System.err.println("wrote " + g.names.size() + " fixtures to " + out);
    }
}
