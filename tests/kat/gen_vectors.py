#!/usr/bin/python3
"""
gen_vectors.py -- known-answer vectors for every hash of libchash's registry (CH_HASH_LIST).

The expected values come from implementations independent of the C code under test:
  md5           hashlib
  xxh3          the xxhash module (XXH3 64-bit, seed 0)
  fnv1a32       the small pure-Python FNV-1a 32 below
  fnv1a32_fmix  fmix32(fnv1a32) with the pure-Python fmix32 below
  murmur3_32    the small pure-Python MurmurHash3 x86_32 below (seed 0)
Before anything is written, every one of them is checked against published reference vectors
(the FNV reference test suite, the SMHasher-derived MurmurHash3 vectors, RFC 1321, xxHash's own
xxhsum sanity check); a mismatch aborts.

Usage:
  gen_vectors.py               write hash_vectors.h next to this script
  gen_vectors.py --check PATH  regenerate in memory; exit 1 with a diff if PATH differs
  gen_vectors.py --stdout      write the header to standard output

Needs Debian's python3 (/usr/bin/python3) with python3-xxhash. Without the xxhash module the
script fails (exit 1): a CI check must not pass silently.
"""

import argparse
import difflib
import hashlib
import os
import sys

try:
    import xxhash
except ImportError:  # pragma: no cover - exercised on machines without python3-xxhash
    sys.stderr.write(
        "gen_vectors.py: FAIL: the Python 'xxhash' module is missing, so the xxh3 vectors cannot "
        "be computed or checked.\n"
        "  Install it (Debian/Ubuntu: apt-get install python3-xxhash) and run this script with "
        "that interpreter (/usr/bin/python3).\n"
        "  interpreter used: %s\n" % sys.executable)
    sys.exit(1)

HEADER_NAME = "hash_vectors.h"
M32 = 0xFFFFFFFF
M64 = 0xFFFFFFFFFFFFFFFF

# The registry, in CH_HASH_LIST order (include/chash.h). A hash added there and not here has no
# vectors, which test_kat.c reports as a failure.
HASHES = ["fnv1a32_fmix", "fnv1a32", "murmur3_32", "xxh3", "md5"]


# ---- independent implementations -------------------------------------------------------------

def fnv1a32(data):
    h = 2166136261
    for b in data:
        h ^= b
        h = (h * 16777619) & M32
    return h


def fmix32(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    h ^= h >> 16
    return h


def _rotl32(x, r):
    return ((x << r) | (x >> (32 - r))) & M32


def murmur3_32(data, seed=0):
    """MurmurHash3_x86_32 (Appleby, SMHasher); blocks and tail read little-endian."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & M32
    n = len(data)
    nblocks = n // 4
    for i in range(nblocks):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * c1) & M32
        k = _rotl32(k, 15)
        k = (k * c2) & M32
        h ^= k
        h = _rotl32(h, 13)
        h = (h * 5 + 0xE6546B64) & M32
    tail = data[4 * nblocks:]
    if tail:
        k = int.from_bytes(tail, "little")
        k = (k * c1) & M32
        k = _rotl32(k, 15)
        k = (k * c2) & M32
        h ^= k
    h ^= n & M32
    return fmix32(h)


def md5_64(data):
    return int.from_bytes(hashlib.md5(data).digest()[:8], "little")


def xxh3_64(data):
    return xxhash.xxh3_64_intdigest(data, seed=0)


# name -> (native bits, function returning the 64-bit registry value)
IMPLS = {
    "fnv1a32_fmix": (32, lambda d: fmix32(fnv1a32(d))),
    "fnv1a32": (32, fnv1a32),
    "murmur3_32": (32, lambda d: murmur3_32(d, 0)),
    "xxh3": (64, xxh3_64),
    "md5": (64, md5_64),
}


# ---- published reference vectors ---------------------------------------------------------------

# FNV-1a 32: Landon Curt Noll's reference test suite, test_fnv.c (FNV 5.0.2): fnv_test_str[]
# with fnv1a_32_vector[]. TEST0 entries include the string's trailing NUL. The index in the
# suite is given for each.
def _r(s, n):
    return s * n


FNV1A32_PUBLISHED = [
    (b"", 0x811C9DC5),                    # 0
    (b"a", 0xE40C292C),                   # 1
    (b"b", 0xE70C2DE5),                   # 2
    (b"c", 0xE60C2C52),                   # 3
    (b"d", 0xE10C2473),                   # 4
    (b"e", 0xE00C22E0),                   # 5
    (b"f", 0xE30C2799),                   # 6
    (b"fo", 0x6222E842),                  # 7
    (b"foo", 0xA9F37ED7),                 # 8
    (b"foob", 0x3F5076EF),                # 9
    (b"fooba", 0x39AAA18A),               # 10
    (b"foobar", 0xBF9CF968),              # 11
    (b"\0", 0x050C5D1F),                  # 12 TEST0("")
    (b"a\0", 0x2B24D044),                 # 13
    (b"b\0", 0x9D2C3F7F),                 # 14
    (b"c\0", 0x7729C516),                 # 15
    (b"d\0", 0xB91D6109),                 # 16
    (b"e\0", 0x931AE6A0),                 # 17
    (b"f\0", 0x052255DB),                 # 18
    (b"fo\0", 0xBEF39FE6),                # 19
    (b"foo\0", 0x6150AC75),               # 20
    (b"foob\0", 0x9AAB3A3D),              # 21
    (b"fooba\0", 0x519C4C3E),             # 22
    (b"foobar\0", 0x0C1C9EB8),            # 23
    (b"chongo was here!\n", 0xD49930D5),  # 39
    (b"hi", 0x683AF69A),                  # 84
    (b"hi\0", 0xAED2346E),                # 85
    (b"hello", 0x4F9F2CAB),               # 86
    (b"hello\0", 0x02935131),             # 87
    (b"\xff\x00\x00\x01", 0xC48FB86D),    # 88
    (b"\x01\x00\x00\xff", 0x2269F369),    # 89
    (b"\xff\x00\x00\x02", 0xC18FB3B4),    # 90
    (b"\x02\x00\x00\xff", 0x50EF1236),    # 91
    (b"\xff\x00\x00\x03", 0xC28FB547),    # 92
    (b"\x03\x00\x00\xff", 0x96C3BF47),    # 93
    (b"\xff\x00\x00\x04", 0xBF8FB08E),    # 94
    (b"\x04\x00\x00\xff", 0xF3E4D49C),    # 95
    (b"\x40\x51\x4e\x44", 0x32179058),    # 96
    (b"\x44\x4e\x51\x40", 0x280BFEE6),    # 97
    (_r(b"\xfe\xdc\xba\x98\x76\x54\x32\x10", 10), 0x0AE4FF65),  # 192
    (_r(b"\x00", 500), 0xFA823DD5),       # 199
    (_r(b"\x07", 500), 0x21A27271),       # 200
    (_r(b"~", 500), 0x83C5C6D5),          # 201
    (_r(b"\x7f", 500), 0x813B0881),       # 202
]

# MurmurHash3 x86_32 with seeds: Ian Boyd's vectors translated from SMHasher's verification
# (stackoverflow.com/a/31929528, also in the mmh3 test suite) and the seed-0x9747b28c string
# vectors published with them and on Wikipedia's MurmurHash page.
MURMUR3_PUBLISHED = [
    (b"", 0, 0x00000000),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"\x00\x00\x00", 0, 0x85F0B427),
    (b"\x00\x00", 0, 0x30F4C306),
    (b"\x00", 0, 0x514E28B7),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"aaa", 0x9747B28C, 0x283E0130),
    (b"aa", 0x9747B28C, 0x5D211726),
    (b"a", 0x9747B28C, 0x7FA09EA6),
    (b"abcd", 0x9747B28C, 0xF0478627),
    (b"abc", 0x9747B28C, 0xC84A62DD),
    (b"ab", 0x9747B28C, 0x74875592),
    (b"test", 0x9747B28C, 0x704B81DC),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (("\u03c0" * 8).encode("utf-8"), 0x9747B28C, 0xD58063C1),
    (b"a" * 256, 0x9747B28C, 0x37405BDC),
    (b"abc", 0, 0xB3DD93FA),
    (b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 0, 0xEE925B90),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
]

# fmix32: no table of its own is published, but MurmurHash3 of the empty input with seed s is
# exactly fmix32(s ^ 0) (no blocks, no tail, len = 0), so the published empty-input vectors
# above fix these values: fmix32(0) = 0, fmix32(1) = 0x514E28B7, fmix32(0xffffffff) = 0x81F16F39.
# The one-byte "\0" vector (seed 0) gives fmix32(0 ^ 1) = 0x514E28B7 again, by another path.
FMIX32_DERIVED = [
    (0x00000000, 0x00000000),
    (0x00000001, 0x514E28B7),
    (0xFFFFFFFF, 0x81F16F39),
]

# MD5: RFC 1321, appendix A.5 (the test suite).
MD5_PUBLISHED = [
    (b"", "d41d8cd98f00b204e9800998ecf8427e"),
    (b"a", "0cc175b9c0f1b6a831c399e269772661"),
    (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
    (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
    (b"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
    (b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
     "d174ab98d277d9f5a5611c2c9f419d9f"),
    (b"1234567890" * 8, "57edf4a22be3c955ac49da2e2107b67a"),
]


def xxh_sanity_buffer(n):
    """xxHash's XSUM_fillTestBuffer (cli/xsum_sanity_check.c): the input of its sanity check."""
    prime32, prime64 = 2654435761, 11400714785074694797
    gen = prime32
    out = bytearray()
    for _ in range(n):
        out.append(gen >> 56)
        gen = (gen * prime64) & M64
    return bytes(out)


# XXH3 64-bit, seed 0, over prefixes of the sanity buffer: xxHash's xxhsum sanity check
# (XSUM_testXXH3 calls with seed 0). Every length class of XXH3's code paths.
XXH3_PUBLISHED = [
    (0, 0x2D06800538D394C2),
    (1, 0xC44BDFF4074EECDB),
    (6, 0x27B56A84CD2D7325),
    (12, 0xA713DAF0DFBB77E7),
    (24, 0xA3FE70BF9D3510EB),
    (48, 0x397DA259ECBA1F11),
    (80, 0xBCDEFBBB2C47C90A),
    (195, 0xCD94217EE362EC3A),
    (403, 0xCDEB804D65C6DEA4),
    (512, 0x617E49599013CB6B),
    (2048, 0xDD59E2C3A5F038E0),
    (2240, 0x6E73A90539CF2948),
    (2367, 0xCB37AEB9E5D361ED),
]


def self_check():
    """Checks every independent implementation against the published vectors; dies on error."""
    errors = []

    def expect(what, got, want):
        if got != want:
            errors.append("%s: got 0x%x, published 0x%x" % (what, got, want))

    for data, want in FNV1A32_PUBLISHED:
        expect("fnv1a32(%r)" % data[:24], fnv1a32(data), want)
    for data, seed, want in MURMUR3_PUBLISHED:
        expect("murmur3_32(%r, seed=0x%x)" % (data[:24], seed), murmur3_32(data, seed), want)
    for x, want in FMIX32_DERIVED:
        expect("fmix32(0x%x)" % x, fmix32(x), want)
        # The derivation itself: empty input, seed x.
        expect("murmur3_32(b'', seed=0x%x)" % x, murmur3_32(b"", x), want)
    for data, want in MD5_PUBLISHED:
        got = hashlib.md5(data).hexdigest()
        if got != want:
            errors.append("md5(%r): got %s, published %s" % (data[:24], got, want))
    buf = xxh_sanity_buffer(max(n for n, _ in XXH3_PUBLISHED))
    for n, want in XXH3_PUBLISHED:
        expect("xxh3_64(sanity[0:%d])" % n, xxh3_64(buf[:n]), want)
    if errors:
        sys.stderr.write("gen_vectors.py: FAIL: an implementation disagrees with the published "
                         "vectors; nothing written:\n  " + "\n  ".join(errors) + "\n")
        sys.exit(1)


# ---- the inputs ---------------------------------------------------------------------------------

def inputs():
    """(input bytes, short description) in a fixed order; no duplicates."""
    alpha = b"abcdefghijklmnopq"  # 17 bytes
    items = [(b"", "empty")]
    # 1..17 bytes: every murmur3 tail length, every XXH3 short-input class up to 17-32.
    items += [(alpha[:n], "prefix %d" % n) for n in range(1, 18)]
    # Bytes >= 0x80, alone and mixed.
    items += [
        (b"\x80", "0x80"),
        (b"\xff", "0xff"),
        (b"\xff\xff\xff\xff", "four 0xff (murmur3 published, seed 0)"),
        (b"\xfe\xdc\xba\x98\x76\x54\x32\x10", "high bytes then low"),
        (bytes(range(0x80, 0x100)), "0x80..0xff"),
        (("\u03c0" * 8).encode("utf-8"), "UTF-8 pi x8"),
        ("caf\u00e9:\u00fc\u00f1\u00ee".encode("utf-8"), "UTF-8 key"),
        (b"\xffabc", "0xff then hex-like letters"),
        (b"\x01" b"23", "0x01 then digits"),
    ]
    # Embedded and trailing NULs.
    items += [
        (b"\x00", "one NUL"),
        (b"\x00\x00\x00\x00", "four NULs (murmur3 published, seed 0)"),
        (b"a\x00b", "embedded NUL"),
        (b"node\x001", "NUL inside a key"),
        (b"foobar\x00", "trailing NUL (FNV suite TEST0)"),
        (b"\x21\x43\x65\x87", "murmur3 endianness vector"),
        (b"\x21\x43\x65", "murmur3 3-byte tail vector"),
    ]
    # Published strings of the reference suites.
    items += [
        (b"foobar", "FNV suite"),
        (b"chongo was here!\n", "FNV suite, 17 bytes"),
        (b"message digest", "RFC 1321"),
        (b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "RFC 1321"),
        (b"The quick brown fox jumps over the lazy dog", "pangram"),
        (b"Hello, world!", "murmur3 suite string"),
    ]
    # Typical keys: cache keys, ring points "<id>#<j>", ketama-style server strings.
    items += [
        (b"user:1", "key"),
        (b"user:2", "key"),
        (b"user:42", "key"),
        (b"session:7f3a9c", "key"),
        (b"node-1", "node id"),
        (b"node-1#0", "ring point"),
        (b"node-1#1", "ring point"),
        (b"node-1#159", "ring point (last of 160)"),
        (b"node-2#0", "ring point"),
        (b"10.0.0.1:11211-0", "ketama point"),
        (b"cache/objects/2024/01/31/thumbnail-000123.jpg", "path key"),
    ]
    # Long inputs: a deterministic 1000-byte pattern over all byte values, a run of one byte,
    # and xxHash's sanity buffer at lengths of its published XXH3 vectors (incl. > 1 block).
    items += [
        (bytes((i * 131 + 17) & 0xFF for i in range(1000)), "1000-byte pattern (i*131+17)"),
        (b"a" * 256, "256 x 'a'"),
    ]
    sanity = xxh_sanity_buffer(max(n for n, _ in XXH3_PUBLISHED))
    present = set(data for data, _ in items)
    for n, _ in XXH3_PUBLISHED:
        if sanity[:n] not in present:  # [0:0] is "", [0:1] is "\0": already listed
            items.append((sanity[:n], "xxHash sanity buffer [0:%d]" % n))
    seen = set()
    for data, _ in items:
        if data in seen:
            raise SystemExit("gen_vectors.py: duplicate input %r" % data[:32])
        seen.add(data)
    return items


# ---- C output -----------------------------------------------------------------------------------

HEXDIGITS = set(b"0123456789abcdefABCDEF")


def c_literal_pieces(data):
    """data as C string-literal pieces (each a quoted string), split so that no hex escape can
    absorb a following hex-digit character, and at most ~72 characters each."""
    pieces = []
    cur = ""
    prev_hex = False
    for b in data:
        if b == 0x22:
            tok, is_hex = '\\"', False
        elif b == 0x5C:
            tok, is_hex = "\\\\", False
        elif b == 0x3F:
            tok, is_hex = "\\?", False  # no trigraphs (-std=c11 enables them)
        elif b == 0x0A:
            tok, is_hex = "\\n", False
        elif b == 0x09:
            tok, is_hex = "\\t", False
        elif 0x20 <= b < 0x7F:
            tok, is_hex = chr(b), False
        else:
            tok, is_hex = "\\x%02x" % b, True
        if prev_hex and not is_hex and b in HEXDIGITS:
            pieces.append(cur)
            cur = ""
        if len(cur) + len(tok) > 72:
            pieces.append(cur)
            cur = ""
        cur += tok
        prev_hex = is_hex
    pieces.append(cur)
    return ['"%s"' % p for p in pieces]


def c_literal(data, indent):
    """One C string literal expression; long ones continue on following lines."""
    pieces = c_literal_pieces(data)
    lines = []
    line = ""
    for p in pieces:
        if line and len(line) + 1 + len(p) > 76:
            lines.append(line)
            line = p
        else:
            line = p if not line else line + " " + p
    lines.append(line)
    return ("\n" + " " * indent).join(lines)


def c_comment_text(s):
    return s.replace("*/", "* /")


def published_note(name, data):
    if name == "fnv1a32" and any(d == data for d, _ in FNV1A32_PUBLISHED):
        return "FNV suite"
    if name == "murmur3_32" and any(d == data and s == 0 for d, s, _ in MURMUR3_PUBLISHED):
        return "murmur3 vectors"
    if name == "md5" and any(d == data for d, _ in MD5_PUBLISHED):
        return "RFC 1321"
    if name == "xxh3":
        for n, _ in XXH3_PUBLISHED:
            if data == xxh_sanity_buffer(n):
                return "xxhsum sanity check"
    return None


def render():
    items = inputs()
    # Long inputs are spelled once, as macros; short ones inline in each row. A long input that
    # is a prefix of a longer one (the xxHash sanity-buffer prefixes) uses the longer one's
    # macro: a row hashes the first len bytes of its literal.
    def is_long(data):
        lit = c_literal(data, 4)
        return "\n" in lit or len(lit) > 48

    macros = []
    spelled = {}
    owner = {}
    for i, (data, _) in enumerate(items):
        if is_long(data):
            owner[i] = max((j for j, (d, _) in enumerate(items) if d.startswith(data)),
                           key=lambda j: (len(items[j][0]), -j))
    for i, (data, desc) in enumerate(items):
        if i not in owner:
            spelled[i] = c_literal(data, 4)
        elif owner[i] == i:
            mname = "KAT_IN_%02d" % i
            lit = c_literal(data, 4)
            macros.append("/* input %d: %s, %d bytes */\n#define %s \\\n    %s\n" % (
                i, c_comment_text(desc), len(data), mname, lit.replace("\n", " \\\n")))
            spelled[i] = mname
    for i, j in owner.items():
        if j != i:
            spelled[i] = "KAT_IN_%02d" % j
            items[i] = (items[i][0], "%s (the first %d bytes of input %d)" % (
                items[i][1], len(items[i][0]), j))

    out = []
    w = out.append
    w("/*\n"
      " * hash_vectors.h -- GENERATED by tests/kat/gen_vectors.py. DO NOT EDIT: change the\n"
      " * generator and run it (tests/kat/gen_vectors.py); the kat_vectors_current test fails when\n"
      " * this file differs from what the generator produces.\n"
      " *\n"
      " * Known answers for every hash of CH_HASH_LIST, computed by implementations independent of\n"
      " * libchash (hashlib MD5, the xxhash module's XXH3, pure-Python FNV-1a 32 / fmix32 /\n"
      " * MurmurHash3 x86_32), each first checked against published reference vectors. For 32-bit\n"
      " * hashes h64 is the 32-bit value zero-extended; for md5 h64 is digest bytes 0..7 read\n"
      " * little-endian; h32 is always the low 32 bits of h64.\n"
      " */\n"
      "#ifndef CHASH_KAT_HASH_VECTORS_H\n"
      "#define CHASH_KAT_HASH_VECTORS_H\n\n"
      "#include <stddef.h>\n#include <stdint.h>\n\n")
    w("/* ---- long inputs, spelled once ---- */\n\n")
    for m in macros:
        w(m + "\n")

    w("/* ---- registry hashes: one row per (hash, input) ---- */\n\n")
    w("typedef struct kat_hash_vector {\n"
      "    const char *hash;  /* registry name, for ch_hash_from_name() */\n"
      "    const char *input; /* the input is its first len bytes (NULs included) */\n"
      "    size_t len;\n"
      "    uint32_t h32;      /* ch_hash32() */\n"
      "    uint64_t h64;      /* ch_hash64() */\n"
      "} kat_hash_vector;\n\n")
    w("static const kat_hash_vector kat_hash_vectors[] = {\n")
    for name in HASHES:
        bits, fn = IMPLS[name]
        w("    /* %s (%d-bit) */\n" % (name, bits))
        for i, (data, desc) in enumerate(items):
            h64 = fn(data) & M64
            if bits == 32:
                assert h64 <= M32
            h32 = h64 & M32
            note = published_note(name, data)
            comment = "input %d: %s%s" % (i, desc, "; published value (%s)" % note if note else "")
            w("    /* %s */\n" % c_comment_text(comment))
            w("    {\"%s\", %s, %d, UINT32_C(0x%08x), UINT64_C(0x%016x)},\n" % (
                name, spelled[i], len(data), h32, h64))
    w("};\n\n")
    w("#define KAT_HASH_VECTORS_COUNT (sizeof kat_hash_vectors / sizeof kat_hash_vectors[0])\n\n")

    w("/* ---- published vectors, for the building blocks ---- */\n\n")
    w("typedef struct kat_seeded_vector {\n"
      "    const char *input;\n"
      "    size_t len;\n"
      "    uint32_t seed;\n"
      "    uint32_t expected;\n"
      "} kat_seeded_vector;\n\n")
    w("/* MurmurHash3 x86_32 with seeds: Ian Boyd's SMHasher-derived vectors\n"
      " * (stackoverflow.com/a/31929528) and the seed-0x9747b28c string vectors (Wikipedia). */\n")
    w("static const kat_seeded_vector kat_murmur3_vectors[] = {\n")
    for data, seed, want in MURMUR3_PUBLISHED:
        w("    {%s, %d, UINT32_C(0x%08x), UINT32_C(0x%08x)},\n" % (
            c_literal(data, 5), len(data), seed, want))
    w("};\n\n")
    w("#define KAT_MURMUR3_VECTORS_COUNT "
      "(sizeof kat_murmur3_vectors / sizeof kat_murmur3_vectors[0])\n\n")

    w("typedef struct kat_fnv_vector {\n"
      "    const char *input;\n"
      "    size_t len;\n"
      "    uint32_t expected;\n"
      "} kat_fnv_vector;\n\n")
    w("/* FNV-1a 32: the FNV reference test suite (test_fnv.c, FNV 5.0.2, fnv1a_32_vector). */\n")
    w("static const kat_fnv_vector kat_fnv1a32_vectors[] = {\n")
    for data, want in FNV1A32_PUBLISHED:
        w("    {%s, %d, UINT32_C(0x%08x)},\n" % (c_literal(data, 5), len(data), want))
    w("};\n\n")
    w("#define KAT_FNV1A32_VECTORS_COUNT "
      "(sizeof kat_fnv1a32_vectors / sizeof kat_fnv1a32_vectors[0])\n\n")

    w("typedef struct kat_fmix32_vector {\n"
      "    uint32_t in;\n"
      "    uint32_t out;\n"
      "} kat_fmix32_vector;\n\n")
    w("/* fmix32: MurmurHash3 x86_32 of the empty input with seed s is fmix32(s), so the published\n"
      " * empty-input vectors fix these. */\n")
    w("static const kat_fmix32_vector kat_fmix32_vectors[] = {\n")
    for x, want in FMIX32_DERIVED:
        w("    {UINT32_C(0x%08x), UINT32_C(0x%08x)},\n" % (x, want))
    w("};\n\n")
    w("#define KAT_FMIX32_VECTORS_COUNT "
      "(sizeof kat_fmix32_vectors / sizeof kat_fmix32_vectors[0])\n\n")
    w("#endif /* CHASH_KAT_HASH_VECTORS_H */\n")
    return "".join(out)


def main():
    ap = argparse.ArgumentParser(description="Generate or check tests/kat/hash_vectors.h.")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--check", metavar="PATH",
                   help="exit 1 if PATH differs from what this script generates")
    g.add_argument("--stdout", action="store_true", help="write the header to standard output")
    args = ap.parse_args()

    self_check()
    text = render()

    if args.stdout:
        sys.stdout.write(text)
        return 0
    if args.check:
        try:
            with open(args.check, "r", encoding="utf-8", newline="") as f:
                current = f.read()
        except OSError as e:
            sys.stderr.write("gen_vectors.py: FAIL: cannot read %s: %s\n" % (args.check, e))
            return 1
        if current == text:
            print("gen_vectors.py: %s is current" % args.check)
            return 0
        diff = list(difflib.unified_diff(
            current.splitlines(keepends=True), text.splitlines(keepends=True),
            fromfile=args.check, tofile="generated by gen_vectors.py"))
        sys.stderr.write("gen_vectors.py: FAIL: %s is stale or was edited by hand; regenerate it "
                         "with tests/kat/gen_vectors.py. Diff (first 60 lines):\n" % args.check)
        sys.stderr.writelines(diff[:60])
        if len(diff) > 60:
            sys.stderr.write("... (%d more diff lines)\n" % (len(diff) - 60))
        return 1

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), HEADER_NAME)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    print("gen_vectors.py: wrote %s" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
