#!/usr/bin/env python3
"""The functions a profiled run of edgeplane executed, as the input sections of its link.

    scripts/link_order.py BIN MAP CALLGRIND_OUT... > build/link-order.txt
    scripts/link_order.py BIN MAP      # only checks that MAP is BIN's, and BIN has no order
    scripts/link_order.py --test

MAP is the linker's map (GNU ld's or lld's) of BIN's link (`EDGEPLANE_LINK_MAP=FILE` at build time, see
build.rs); CALLGRIND_OUT are callgrind's outputs of a run of that binary, recorded with
`--dump-instr=yes --compress-pos=no --compress-strings=no` (scripts/link-order.sh does it).
Callgrind gives each instruction executed as an address in the binary (also when the binary
has no symbols: the release profile strips them), the map gives the input section
(`.text.<mangled symbol>`) holding each address; sections are printed by the instructions run
in them, most first, one a line after a `#` header. Only the standard library is used.
"""

import bisect
import os
import re
import struct
import sys
import unittest

# An input section in GNU ld's map: its name alone on a line (a long name) with the address and
# size on the next, or all three on one line.
_NAME = re.compile(r"^ (\.text\.\S+)$")
_PLACED = re.compile(r"^ +(0x[0-9a-f]+) +(0x[0-9a-f]+) ")
_INLINE = re.compile(r"^ (\.text\.\S+) +(0x[0-9a-f]+) +(0x[0-9a-f]+) ")
# An input section in lld's map (rustc's default linker on x86_64 Linux): VMA, LMA, size,
# alignment, then `file:(section)`.
_LLD = re.compile(r"^ *([0-9a-f]+) +[0-9a-f]+ +([0-9a-f]+) +\d+ +\S.*:\((\.text\.[^)\s]+)\)$")
# The output section `.text`: its address (GNU ld's, lld's).
_TEXT = re.compile(r"^\.text +0x([0-9a-f]+) |^ *([0-9a-f]+) +[0-9a-f]+ +[0-9a-f]+ +\d+ \.text$")


def text_start(lines):
    """The address of the output section `.text` in a GNU ld or lld map, or None."""
    for line in lines:
        m = _TEXT.match(line.rstrip("\n"))
        if m:
            return int(m.group(1) or m.group(2), 16)
    return None


def map_sections(lines):
    """Placed `.text.*` input sections of a GNU ld or lld map as sorted (start, end, name).

    GNU ld's map first lists discarded sections (garbage-collected, address 0); only the part
    after "Linker script and memory map" places sections. lld's lists placed sections only.
    """
    placed, pending, started = [], None, False
    for line in lines:
        line = line.rstrip("\n")
        m = _LLD.match(line)
        if m:
            placed.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
            continue
        if not started:
            started = line.startswith("Linker script and memory map")
            continue
        if pending is not None:
            m = _PLACED.match(line)
            if m:
                placed.append((int(m.group(1), 16), int(m.group(2), 16), pending))
            pending = None
            continue
        m = _NAME.match(line)
        if m:
            pending = m.group(1)
            continue
        m = _INLINE.match(line)
        if m:
            placed.append((int(m.group(2), 16), int(m.group(3), 16), m.group(1)))
    return sorted((start, start + size, name) for start, size, name in placed if size > 0)


def executed(lines, binary):
    """Instructions run per address of the object whose path ends in `/binary`.

    Cost lines are `ADDRESS LINE IR` (positions `instr line`, uncompressed); the cost line
    after `calls=` is a call's inclusive cost, counted where the call went instead.
    """
    counts, current, skip = {}, False, False
    suffix = "/" + binary
    for line in lines:
        if line.startswith("ob="):
            current = line.rstrip("\n").endswith(suffix)
        elif line.startswith("calls="):
            skip = True
        elif line.startswith("0x"):
            if skip:
                skip = False
                continue
            if current:
                fields = line.split()
                ir = int(fields[2]) if len(fields) > 2 else 1
                address = int(fields[0], 16)
                counts[address] = counts.get(address, 0) + ir
        else:
            skip = False
    return counts


def order(sections, counts):
    """Names of the sections holding executed addresses, most instructions first (ties by
    address, so that the list is stable)."""
    starts = [s[0] for s in sections]
    per_section = {}
    for address, ir in counts.items():
        i = bisect.bisect_right(starts, address) - 1
        if i >= 0 and address < sections[i][1]:
            per_section[i] = per_section.get(i, 0) + ir
    ranked = sorted(per_section.items(), key=lambda item: (-item[1], sections[item[0]][0]))
    return [sections[i][2] for i, _ in ranked]


def elf_sections(path):
    """Section name -> address of the ELF file at `path` (its section headers, 64-bit)."""
    with open(path, "rb") as f:
        elf = f.read()
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)

    def header(i):
        return struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)

    strings = header(shstrndx)[4]
    sections = {}
    for i in range(shnum):
        name, _, _, address, _, _ = header(i)
        sections[elf[strings + name : elf.index(b"\0", strings + name)].decode()] = address
    return sections


def main(argv):
    """Checks BIN and MAP (alone: before a run), then prints the list of the runs given."""
    if len(argv) < 3:
        sys.exit(__doc__)
    binary, map_path = argv[1], argv[2]
    with open(map_path) as f:
        lines = f.readlines()
    elf = elf_sections(binary)
    if ".text.hot" in elf:
        # Valgrind counts code outside `.text` as no object's: the run would name little.
        sys.exit(f"{binary} is linked with a link order: build it with EDGEPLANE_LINK_ORDER=0")
    if text_start(lines) != elf.get(".text"):
        sys.exit(f"{map_path} does not place .text where {binary} has it (not its link?)")
    if len(argv) == 3:
        return
    sections = map_sections(lines)
    if not sections:
        sys.exit(f"{map_path}: no placed .text.* input sections (not a GNU ld or lld map?)")
    counts = {}
    for path in argv[3:]:
        with open(path, errors="replace") as f:
            for address, ir in executed(f, os.path.basename(binary)).items():
                counts[address] = counts.get(address, 0) + ir
    names = order(sections, counts)
    if not names:
        sys.exit("no executed instruction falls in a .text.* section of the map")
    print("# The code a run of edgeplane executed, most instructions first (scripts/link-order.sh).")
    print("# A name the build does not have costs only its placement (build/link_order.rs).")
    for name in names:
        print(name)


class Tests(unittest.TestCase):
    MAP = """Discarded input sections

 .text._ZN4gone17h0000000000000000E
                0x0000000000000000       0x40 a.o

Linker script and memory map

.text           0x0000000000001000     0x2000
 *(.text.unlikely .text.*_unlikely .text.unlikely.*)
 .text._ZN9edgeplane4main17h0123456789abcdefE
                0x0000000000001000       0x80 a.o
                0x0000000000001000                main
 .text.short    0x0000000000001080       0x20 b.o
 .text.empty    0x00000000000010a0        0x0 b.o
 .text          0x00000000000010a0       0x10 c.o
 .text._ZN4cold17h1111111111111111E
                0x0000000000001100      0x100 a.o
"""

    CALLGRIND = """version: 1
positions: instr line
events: Ir
ob=/usr/lib/x86_64-linux-gnu/libc.so.6
fn=memcpy
0x1010 0 99
ob=/tmp/build/edgeplane
fn=0x0000000000001080
0x1080 0 3
0x1084 0 4
calls=1 0x1000
0x1088 0 1000
fn=0x0000000000001000
0x1000 0 5
0x10a4 0 50
ob=/tmp/build/edgeplane-other
0x1100 0 7
"""

    def test_map_sections_are_the_placed_ones(self):
        self.assertEqual(
            map_sections(self.MAP.splitlines(True)),
            [
                (0x1000, 0x1080, ".text._ZN9edgeplane4main17h0123456789abcdefE"),
                (0x1080, 0x10A0, ".text.short"),
                (0x1100, 0x1200, ".text._ZN4cold17h1111111111111111E"),
            ],
        )

    LLD_MAP = """             VMA              LMA     Size Align Out     In      Symbol
          7ab240           7ab240     2000    64 .text
          7ab240           7ab240       80    16         /b/deps/e.cgu.00.rcgu.o:(.text._ZN1a17h0000000000000000E)
          7ab240           7ab240        0     1                 _ZN1a17h0000000000000000E
          7ab2c0           7ab2c0       40    16         /b/jemalloc.o:(.text)
          7ab300           7ab300       20    16         /b/deps/e.cgu.01.rcgu.o:(.text.je_malloc)
"""

    def test_lld_map(self):
        lines = self.LLD_MAP.splitlines(True)
        self.assertEqual(text_start(lines), 0x7AB240)
        self.assertEqual(
            map_sections(lines),
            [
                (0x7AB240, 0x7AB2C0, ".text._ZN1a17h0000000000000000E"),
                (0x7AB300, 0x7AB320, ".text.je_malloc"),
            ],
        )
        self.assertEqual(text_start(self.MAP.splitlines(True)), 0x1000)

    def test_executed_counts_the_binary_alone_without_inclusive_costs(self):
        counts = executed(self.CALLGRIND.splitlines(True), "edgeplane")
        self.assertEqual(counts, {0x1080: 3, 0x1084: 4, 0x1000: 5, 0x10A4: 50})

    def test_order_is_most_instructions_first_and_skips_unnamed_code(self):
        sections = map_sections(self.MAP.splitlines(True))
        counts = executed(self.CALLGRIND.splitlines(True), "edgeplane")
        self.assertEqual(
            order(sections, counts),
            [".text.short", ".text._ZN9edgeplane4main17h0123456789abcdefE"],
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["--test"]:
        unittest.main(argv=sys.argv[:1])
    else:
        main(sys.argv)
