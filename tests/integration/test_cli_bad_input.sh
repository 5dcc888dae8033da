#!/usr/bin/env bash
# issue 12 §8 (bad input gets a clear error): the kvtier CLI refuses a bad argument
# before any call, exit 2 (a bad flag) or 1 (a bad block file), with a message that
# names the argument and says what was expected: negative, zero, malformed or
# overflowing numbers and sizes, a key of the wrong length, a block file shorter or
# longer than the block size, a directory, a missing file. Nothing listens on the
# coordinator endpoint: no check may need the service.
. "$(dirname "$0")/lib.sh"

KEY=00112233445566778899aabbccddeeff
EP=tcp://127.0.0.1:1 # nothing there: the checks are the CLI's own
head -c 100 /dev/zero >"$it_dir/short.bin"
head -c 70000 /dev/zero >"$it_dir/long.bin"
mkdir "$it_dir/adir"

# bad WANT-STATUS EXPECTED-TEXT ARGS...: kvtier ARGS exits WANT-STATUS printing EXPECTED-TEXT
bad() {
  local want=$1 text=$2 rc=0
  shift 2
  timeout 30 "$KVTIER_BIN" "$@" --coordinator "$EP" --timeout 300 >"$it_dir/out" 2>&1 || rc=$?
  [ $rc -eq "$want" ] || it_fail "kvtier $*: status $rc, want $want: $(cat "$it_dir/out")"
  grep -qF -- "$text" "$it_dir/out" || it_fail "kvtier $* lacks '$text': $(cat "$it_dir/out")"
}

bad 2 '--block-size -5: bad size "-5": must not be negative' put --key $KEY --pattern --block-size -5
bad 2 '--block-size: 0 is not in 1 B..1 GiB' put --key $KEY --pattern --block-size 0
bad 2 '--block-size abc: bad size "abc": expected a number of bytes and a unit' \
  put --key $KEY --pattern --block-size abc
bad 2 '--block-size 18446744073709551617: bad size "18446744073709551617": overflows 64 bits' \
  put --key $KEY --pattern --block-size 18446744073709551617
bad 2 '--block-size: 2GiB is not in 1 B..1 GiB' put --key $KEY --pattern --block-size 2GiB
bad 2 '--tokens-per-block: expected an integer in 1..4294967295, got "-1" (negative)' \
  put --key $KEY --pattern --tokens-per-block -1
bad 2 '--tokens-per-block: expected an integer in 1..4294967295, got "0"' \
  put --key $KEY --pattern --tokens-per-block 0
bad 2 '--tokens-per-block: expected an integer in 1..4294967295, got "99999999999999999999"' \
  put --key $KEY --pattern --tokens-per-block 99999999999999999999
bad 2 '--tokens-per-block: expected an integer in 1..4294967295, got "+5"' \
  put --key $KEY --pattern --tokens-per-block +5
bad 2 '--timeout: expected an integer in' get --key $KEY --verify --timeout -5
bad 2 '--window: expected an integer in' lookup --window -2 $KEY
bad 2 '--key: "0011" is not a key (32 hex digits)' put --key 0011 --pattern
bad 1 "$it_dir/short.bin is shorter than 65536 bytes, the instance's block size (--block-size)" \
  put --key $KEY --file "$it_dir/short.bin"
bad 1 "$it_dir/long.bin is longer than 65536 bytes, the instance's block size (--block-size)" \
  put --key $KEY --file "$it_dir/long.bin"
bad 1 "$it_dir/short.bin is shorter than 4096 bytes" \
  put --key $KEY --file "$it_dir/short.bin" --block-size 4KiB
bad 1 "--file $it_dir/adir: a directory, not a file holding one block" put --key $KEY --file "$it_dir/adir"
bad 1 "--file $it_dir/none.bin: No such file or directory" put --key $KEY --file "$it_dir/none.bin"
it_log "PASS"
