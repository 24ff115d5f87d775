#!/bin/sh
# Regenerates the golden fixtures with the official ZooKeeper jute classes.
#
#   regenerate.sh [DIR]     write the fixtures into DIR (default: the committed
#                           protocol-tests/fixtures), replacing any *.bin there
#   regenerate.sh --check   generate into a temporary directory and compare it
#                           with the committed fixtures; exit 1 on a difference
#
# Needs a JDK (javac, java) and ZooKeeper's jars: on Debian, the packages
# default-jdk-headless and libzookeeper-java. Override the jar locations with
# ZOOKEEPER_JAR, ZOOKEEPER_JUTE_JAR and SLF4J_JARS if they live elsewhere.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
committed=$(cd "$here/.." && pwd)/fixtures

check=false
target=$committed
case "${1:-}" in
    --check) check=true ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    "") ;;
    *) target=$1 ;;
esac

zk_jar=${ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}
jute_jar=${ZOOKEEPER_JUTE_JAR:-/usr/share/java/zookeeper-jute.jar}
# CreateMode logs through slf4j; the no-op binding keeps stderr quiet.
slf4j=${SLF4J_JARS:-/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar}
for jar in "$zk_jar" "$jute_jar"; do
    if [ ! -f "$jar" ]; then
        echo "regenerate.sh: $jar not found (install libzookeeper-java)" >&2
        exit 2
    fi
done
cp="$zk_jar:$jute_jar:$slf4j"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

javac -nowarn -encoding UTF-8 -cp "$cp" -d "$work/classes" "$here/GenerateGolden.java"
java -cp "$cp:$work/classes" GenerateGolden "$work/fixtures"

if $check; then
    if diff -r "$committed" "$work/fixtures"; then
        echo "fixtures are up to date" >&2
    else
        echo "regenerate.sh: committed fixtures differ from the jute output; run $0" >&2
        exit 1
    fi
else
    mkdir -p "$target"
    rm -f "$target"/*.bin
    cp "$work/fixtures"/*.bin "$target"/
    echo "wrote $(ls "$target"/*.bin | wc -l) fixtures to $target" >&2
fi
