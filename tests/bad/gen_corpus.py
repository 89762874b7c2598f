#!/usr/bin/env python3
"""Writes the bad-file corpus of tests/it/diagnostics.rs: copies of the first shipped good files (as of
commit 9472727, so the corpus does not move when the shipped files change) with one or a few
things broken, plus hand-written files (binary garbage, invalid UTF-8, aliases, cycles).

Run from anywhere: `python3 tests/bad/gen_corpus.py`. It only (over)writes files under tests/bad/
and tests/bad/parts/; read the snapshots after regenerating them.
"""
import os, sys, random
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests/bad")
os.makedirs(os.path.join(out, "parts"), exist_ok=True)
import subprocess
# The good files as first committed: the corpus must not move when the shipped files are edited.
BASE = "9472727"
def show(path):
    return subprocess.run(["git", "-C", root, "show", BASE + ":" + path], check=True, capture_output=True, text=True).stdout
SYS = show("architectures/gb200-nvl72.ron")
DEV = show("architectures/parts/b200-gb200.ron")
WAFER = """// A wafer-scale device: one die whose on-wafer mesh spans every core.
Device(
    version: 1,
    name: "Example wafer",
    sources: {
        "vendor": "vendor whitepaper, table 2",
    },
    source: "vendor",
    die: Die(
        name: "wafer die",
        area: "46225 mm2",
        clock: "1.1 GHz",
        cores: 900000,
        compute: [
            (name: "tensor", kind: Matrix, units: 900000, ops_per_cycle: {"bf16": "128 FLOP/cycle"},
             peak: {"bf16": "126.72 PFLOP/s"}),
        ],
        sram: [
            (name: "SRAM", kind: Sram, attach: Core, capacity: "48 KiB", bandwidth: "100 GB/s"),
        ],
        mesh: (topology: Mesh2D, dims: [900, 1000], link_bandwidth: "40 GB/s", hop_latency: "1 ns"),
    ),
    tdp: "23 kW",
    efficiency: (matmul: "0.5 @assumed", memory: "0.8 @assumed", network: "0.8 @assumed"),
)
"""
BASES = {"sys": SYS, "dev": DEV, "wafer": WAFER}

def sub(text, old, new, count=1):
    assert old in text, (old,)
    return text.replace(old, new, count)

def make(name, base, *reps, header=None):
    t = BASES[base]
    for old, new in reps:
        t = sub(t, old, new)
    if header:
        t = "// " + header + "\n" + t
    write(name, t)

def write(name, t):
    p = os.path.join(out, name)
    mode = "wb" if isinstance(t, bytes) else "w"
    with open(p, mode) as f:
        f.write(t)

# helper part files
write("parts/b200-gb200.ron", DEV)
write("parts/circ-a.ron", '// Alias: the device is whatever circ-b.ron says.\nUse("circ-b.ron")\n')
write("parts/circ-b.ron", '// Alias back to circ-a.ron: a cycle.\nUse("circ-a.ron")\n')
write("parts/node-tray.ron", 'Node(\n    version: 1,\n    name: "a node, not a device",\n    devices: 4,\n)\n')
write("parts/broken-device.ron", sub(sub(DEV, '"1200 W @glk-b200"', '"1200 V @glk-b200"'),
                                    'memory: "0.85 @assumed"', 'memory: "1.85 @assumed"'))
write("parts/syntax-error-device.ron", sub(DEV, '    dies: 2,\n', '    dies: 2\n'))
write("parts/unversioned-device.ron", sub(DEV, "    version: 1,\n", ""))

S = "sys"
# --- syntax ---
make("syntax-unclosed-paren.ron", S, ('    facility: (pue: "1.15 @assumed", power_limit: "132 kW @introl-gb200"),\n)', '    facility: (pue: "1.15 @assumed", power_limit: "132 kW @introl-gb200"),\n'), header="The System( is never closed.")
make("syntax-missing-comma.ron", S, ('    nodes: 18,\n', '    nodes: 18\n'), header="A comma is missing after `nodes: 18`.")
make("syntax-trailing-characters.ron", S, ('    facility: (pue: "1.15 @assumed", power_limit: "132 kW @introl-gb200"),\n)', '    facility: (pue: "1.15 @assumed", power_limit: "132 kW @introl-gb200"),\n)\n)\n'), header="One closing parenthesis too many.")
make("syntax-unterminated-string.ron", S, ('    name: "NVIDIA GB200 NVL72",', '    name: "NVIDIA GB200 NVL72,'), header="A string is never closed.")
make("syntax-semicolon.ron", S, ('    nodes: 18,', '    nodes: 18;'), header="A semicolon where a comma belongs.")
make("syntax-unclosed-map.ron", S, ('"nv-grace": "NVIDIA Grace CPU Superchip datasheet: up to 500 W per superchip incl. memory (Grace alone ~250 W)",\n    },', '"nv-grace": "NVIDIA Grace CPU Superchip datasheet: up to 500 W per superchip incl. memory (Grace alone ~250 W)",'), header="The `sources` map is never closed.")
make("syntax-stray-comma-in-map.ron", S, ('"nv-grace": "NVIDIA Grace CPU Superchip datasheet: up to 500 W per superchip incl. memory (Grace alone ~250 W)",\n    },', '"nv-grace": "NVIDIA Grace CPU Superchip datasheet: up to 500 W per superchip incl. memory (Grace alone ~250 W)",\n    ,\n    },'), header="Two commas in a row in the `sources` map.")
write("syntax-deep-nesting.ron", "// Brackets nested 500 deep where a name belongs.\nSystem(\n    version: 1,\n    name: " + "[" * 500 + "\n)\n")
write("empty.ron", "")
write("whitespace-only.ron", "\n   \n\t\n")
write("comment-only.ron", "// Just a comment, no value.\n/* and a block comment */\n")
random.seed(7)
write("binary-garbage.ron", bytes(random.randrange(256) for _ in range(512)))
write("invalid-utf8.ron", sub(SYS, '    name: "NVIDIA GB200 NVL72",', '    name: "NVIDIA GB200 NVL72 \xffcaf\xe9",').encode("utf-8").replace(b"\xc3\xbf", b"\xff").replace(b"\xc3\xa9", b"\xe9"))
write("nul-bytes.ron", "System(\x00\x00version: 1)\n")
# --- kinds, fields, shapes ---
make("wrong-kind.ron", S, ("System(\n", "Sytem(\n", ), header="The top-level kind is misspelt.")
write("not-a-tessera-value.ron", '"just a string"\n')
make("unknown-field-misspelt.ron", S, ("    nodes: 18,", "    nodse: 18,"), header="`nodes` is misspelt.")
make("unknown-field-nested.ron", S, ('        bandwidth: "1.8 TB/s @mlperf-gb200-json",', '        bandwith: "1.8 TB/s @mlperf-gb200-json",'), header="`bandwidth` is misspelt inside scale_up.")
make("unknown-field-no-suggestion.ron", S, ("    nodes: 18,", "    nodes: 18,\n    colour: \"green\","), header="A field tessera has never heard of.")
make("missing-field.ron", S, ("    nodes: 18,\n", ""), header="`nodes` is missing.")
make("system-missing-version.ron", S, ("    version: 1,\n", ""), header="A System without `version`.")
make("unsupported-version.ron", S, ("    version: 1,", "    version: 7,"), header="A version this tessera does not read.")
make("duplicate-field.ron", S, ("    nodes: 18,", "    nodes: 18,\n    nodes: 36,"), header="`nodes` given twice.")
make("unknown-variant.ron", S, ("        topology: Switched,", "        topology: Swiched,"), header="A misspelt topology.")
make("wrong-type-string-count.ron", S, ("    nodes: 18,", '    nodes: "18",'), header="A count written as a string.")
make("integer-out-of-range.ron", S, ("    nodes: 18,", "    nodes: 123456789012345678901234567890,"), header="A count beyond 2^64.")
make("negative-count.ron", S, ("    nodes: 18,", "    nodes: -18,"), header="A negative count.")
make("zero-count.ron", S, ("    nodes: 18,", "    nodes: 0,"), header="Zero nodes.")
make("absurd-count.ron", S, ("    nodes: 18,", "    nodes: 18000000000000,"), header="18 trillion nodes.")
# --- quantities ---
make("quantity-without-unit.ron", S, ('"1.8 TB/s @mlperf-gb200-json"', '"1.8 @mlperf-gb200-json"'), header="A bandwidth without its unit.")
make("quantity-as-bare-number.ron", "dev", ('    tdp: "1200 W @glk-b200",', "    tdp: 1200,"), header="A power written as a bare number.")
make("wrong-dimension.ron", S, ('"1.8 TB/s @mlperf-gb200-json"', '"700 W @mlperf-gb200-json"'), header="A power where a bandwidth belongs.")
make("misspelt-unit.ron", S, ('"1.8 TB/s @mlperf-gb200-json"', '"3.35 TB/S @mlperf-gb200-json"'), header="`TB/S` for `TB/s`.")
make("unknown-unit.ron", S, ('        latency: "5 us @assumed",', '        latency: "5 furlongs @assumed",'), header="A unit tessera does not know.")
make("negative-value.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "-1200 W @glk-b200",'), header="A negative TDP.")
make("zero-value.ron", S, ('"1.8 TB/s @mlperf-gb200-json"', '"0 TB/s @mlperf-gb200-json"'), header="A zero bandwidth.")
make("nan-value.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "NaN W @glk-b200",'), header="NaN.")
make("infinite-value.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "inf W @glk-b200",'), header="Infinity.")
make("overflowing-value.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "1e400 W @glk-b200",'), header="A number beyond f64.")
make("absurdly-large-value.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "1200 TW @glk-b200",'), header="A 1.2 PW GPU.")
make("empty-quantity.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "",'), header="An empty quantity.")
make("source-tag-with-space.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "1200 W @glk b200",'), header="A source tag of two words.")
make("undeclared-source.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "1200 W @nvidia-spec",'), header="A source key not in `sources`.")
make("misspelt-source.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "1200 W @glk-b20",'), header="A misspelt source key.")
make("undeclared-default-source.ron", S, ('    source: "setloop",\n    device:', '    source: "set-loop",\n    device:'), header="The default `source` is not declared.")
make("empty-citation.ron", "dev", ('"techpowerup-b200": "techpowerup B200 page: 8 TB/s HBM3e",', '"techpowerup-b200": "",'), header="A source with no citation.")
make("unknown-precision.ron", "dev", ('"bf16": "1250 TFLOP/s @glk-b200",', '"bf61": "1250 TFLOP/s @glk-b200",'), header="`bf61` for `bf16`.")
make("missing-source-warning-and-error.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: "1200 W",'), ('memory: "0.85 @assumed"', 'memory: "85"'), header="A figure with no source (a warning) and an efficiency of 85 (an error).")
# --- semantic ---
make("sparse-as-dense.ron", "dev", ('"fp8": "2500 TFLOP/s @glk-b200",', '"fp8": "5000 TFLOP/s @glk-b200",'), header="fp8 = 4x bf16: a sparse fp8 figure written as dense.")
make("derived-peak-disagrees.ron", "wafer", ('peak: {"bf16": "126.72 PFLOP/s"}', 'peak: {"bf16": "200 PFLOP/s"}'), header="The given peak disagrees with units x ops_per_cycle x clock.")
make("derived-peak-sparse.ron", "wafer", ('peak: {"bf16": "126.72 PFLOP/s"}', 'peak: {"bf16": "253.44 PFLOP/s"}'), header="The given peak is 2x the derived one: sparse written as dense.")
make("efficiency-over-one.ron", "dev", ('matmul: "0.62 @fitted-blackwell"', 'matmul: "1.62 @fitted-blackwell"'), header="An efficiency above 1.")
make("efficiency-percent-over.ron", "dev", ('network: "0.80 @assumed"', 'network: "120 % @assumed"'), header="An efficiency of 120 %.")
make("pue-below-one.ron", S, ('pue: "1.15 @assumed"', 'pue: "0.9 @assumed"'), header="PUE below 1.")
make("oversubscription-below-one.ron", S, ('oversubscription: "1",', 'oversubscription: "0.5",'), header="Oversubscription below 1.")
make("idle-above-tdp.ron", "dev", ('idle_power: "250 W @assumed"', 'idle_power: "1500 W @assumed"'), header="Idle power above TDP.")
make("die-larger-than-wafer.ron", "wafer", ('area: "46225 mm2"', 'area: "80000 mm2"'), header="A die larger than any square cut from a 300 mm wafer.")
make("rack-power-exceeded.ron", S, ('        switches: (count: 18, radix: 72, power: "200 W @introl-gb200"),\n', '        switches: (count: 18, radix: 72, power: "200 W @introl-gb200"),\n        power_limit: "12 kW @introl-gb200",\n'), header="The rack's trays and switches alone draw more than scale_up.power_limit.")
make("facility-power-exceeded.ron", S, ('power_limit: "132 kW @introl-gb200"),', 'power_limit: "100 kW @introl-gb200"),'), header="The rack's parts draw more than facility.power_limit.")
make("node-power-exceeded.ron", S, ('power_limit: "6.5 kW @introl-gb200",', 'power_limit: "5 kW @introl-gb200",'), header="A compute tray's parts draw more than its power_limit.")
make("torus-dims-mismatch.ron", S, ("        topology: Switched,\n        size: 72,", "        topology: Torus,\n        size: 72,\n        dims: [4, 4, 4],"), header="Torus dims multiply to 64, not 72.")
make("torus-without-dims.ron", S, ("        topology: Switched,", "        topology: Torus,"), header="A torus needs dims.")
make("domain-does-not-divide.ron", S, ("        size: 72,", "        size: 24,"), ("    nodes: 18,", "    nodes: 17,"), header="68 devices do not divide into domains of 24.")
make("domain-not-aligned-to-node.ron", S, ("        size: 72,", "        size: 6,"), header="A domain of 6 does not align with nodes of 4.")
make("domain-larger-than-system.ron", S, ("        size: 72,", "        size: 144,"), header="A domain of 144 in a 72-device system.")
make("no-scale-out.ron", S, ("        size: 72,", "        size: 8,"), ('    scale_out: (\n        name: "InfiniBand NDR (ConnectX-7)",\n        topology: RailOptimized,\n        bandwidth: "400 Gb/s @mlperf-gb200-json",\n        latency: "5 us @assumed",\n        oversubscription: "1",\n        energy_per_bit: "5 pJ/bit @assumed",\n    ),\n', ""), header="Nine NVLink domains and no network between them.")
make("mesh-dims-not-cores.ron", "wafer", ("dims: [900, 1000]", "dims: [900, 999]"), header="Mesh dims multiply to 899100, the die has 900000 cores.")
make("mesh-dims-empty.ron", "wafer", ("dims: [900, 1000]", "dims: []"), header="A mesh without dims.")
make("no-compute-no-memory.ron", "wafer", ('''        compute: [
            (name: "tensor", kind: Matrix, units: 900000, ops_per_cycle: {"bf16": "128 FLOP/cycle"},
             peak: {"bf16": "126.72 PFLOP/s"}),
        ],''', "        compute: [],"), ('''        sram: [
            (name: "SRAM", kind: Sram, attach: Core, capacity: "48 KiB", bandwidth: "100 GB/s"),
        ],
''', ""), header="A die with no compute engine and no memory.")
make("engine-without-peak.ron", "wafer", (', units: 900000, ops_per_cycle: {"bf16": "128 FLOP/cycle"},\n             peak: {"bf16": "126.72 PFLOP/s"}', ''), header="An engine without a peak or a way to derive one.")
make("derived-peak-needs-clock.ron", "wafer", ('        clock: "1.1 GHz",\n', ''), ('\n             peak: {"bf16": "126.72 PFLOP/s"}', ''), header="ops_per_cycle without a die clock.")
make("empty-name.ron", S, ('    name: "NVIDIA GB200 NVL72",', '    name: "  ",'), header="An empty name.")
# --- references ---
make("missing-reference.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("parts/b200-gb300.ron")'), header="The part file does not exist.")
make("circular-reference.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("parts/circ-a.ron")'), header="parts/circ-a.ron -> parts/circ-b.ron -> parts/circ-a.ron.")
write("self-reference.ron", '// A part that is an alias of itself.\nUse("self-reference.ron")\n')
make("system-self-reference.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("system-self-reference.ron")'), header="The device is the system file itself.")
make("reference-wrong-kind.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("parts/node-tray.ron")'), header="The device refers to a Node file.")
make("reference-with-errors.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("parts/broken-device.ron")'), header="The referenced part has errors of its own; they point into it.")
make("reference-syntax-error.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("parts/syntax-error-device.ron")'), header="The referenced part does not parse.")
make("reference-missing-version.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("parts/unversioned-device.ron")'), header="The referenced part file has no version.")
make("part-missing-version.ron", "dev", ("    version: 1,\n", ""), header="A part file checked on its own without version.")
make("reference-empty-path.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("")'), header="An empty reference.")
make("reference-directory.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("parts")'), header="A reference to a directory.")
# --- many errors at once ---
make("multi-error-system.ron", S,
     ("    nodes: 18,", "    nodes: 17,"),
     ('cpu_tdp: "250 W @nv-grace"', 'cpu_tdp: "-250 W @nv-grace"'),
     ('nics: (count: 4, bandwidth: "400 Gb/s @mlperf-gb200-json"', 'nics: (count: 4, bandwidth: "400 Gbit/S @mlperf-gb200-json"'),
     ('"1.8 TB/s @mlperf-gb200-json"', '"1.8 kW @mlperf-gb200-json"'),
     ('latency: "1 us @assumed"', 'latency: "1 us @asumed"'),
     ('oversubscription: "1",', 'oversubscription: "0.25",'),
     ('pue: "1.15 @assumed"', 'pue: "NaN @assumed"'),
     header="Seven errors, all reported at once.")
make("multi-error-device.ron", "dev",
     ('"bf16": "1250 TFLOP/s @glk-b200",', '"bf61": "1250 TFLOP/s @glk-b200",'),
     ('capacity: "186 GB @nvl72-hbm"', 'capacity: "0 GB @nvl72-hbm"'),
     ('bandwidth: "8 TB/s @techpowerup-b200"', 'bandwidth: "8 TB @techpowerup-b200"'),
     ('    tdp: "1200 W @glk-b200",', '    tdp: "inf W @glk-b200",'),
     ('matmul: "0.62 @fitted-blackwell"', 'matmul: "62 % @fitted-blackwel"'),
     ('network: "0.80 @assumed"', 'network: "0 @assumed"'),
     header="Six errors in a device file, all reported at once.")
make("syntax-unclosed-nested.ron", S, ('        switches: (count: 18, radix: 72, power: "200 W @introl-gb200"),', '        switches: (count: 18, radix: 72, power: "200 W @introl-gb200",'), header="The `switches: (` is never closed; the error surfaces later.")
make("syntax-unterminated-string-at-end.ron", S, ('    facility: (pue: "1.15 @assumed", power_limit: "132 kW @introl-gb200"),\n)', '    facility: (pue: "1.15 @assumed", power_limit: "132 kW @introl-gb200),\n)'), header="The last string of the file is never closed.")
make("syntax-unclosed-block-comment.ron", S, ('    nodes: 18,', '    /* 18 trays\n    nodes: 18,'), header="A block comment that never ends.")
make("syntax-missing-colon.ron", S, ('    nodes: 18,', '    nodes 18,'), header="A field without its colon.")
make("syntax-map-missing-colon.ron", "dev", ('"bf16": "1250 TFLOP/s @glk-b200",', '"bf16" "1250 TFLOP/s @glk-b200",'), header="A map entry without its colon.")
make("crlf-line-endings.ron", S, ('"1.8 TB/s @mlperf-gb200-json"', '"1.8 TB/S @mlperf-gb200-json"'), header="Windows line endings; the error still points at the right column.")
write("crlf-line-endings.ron", open(os.path.join(out, "crlf-line-endings.ron")).read().replace("\n", "\r\n").encode())
write("bom-then-error.ron", ("\ufeff" + "// A UTF-8 byte-order mark, then a misspelt field.\n" + sub(SYS, "    nodes: 18,", "    node_count: 18,")).encode("utf-8"))
write("tabs-and-unicode.ron", "// Tabs and non-ASCII text before the error: the caret still lines up.\n" + sub(sub(SYS, '    name: "NVIDIA GB200 NVL72",', '\tname: "NVIDIA GB200 NVL72 — Größe",'), '    source: "setloop",\n    device:', '\tsource: "setloop",\n\tdevice:').replace('    facility: (pue: "1.15 @assumed"', '\tfacility: (pue: "1,15 @assumed"'))
make("wrong-type-list-for-quantity.ron", "dev", ('    tdp: "1200 W @glk-b200",', '    tdp: ["1200 W @glk-b200"],'), header="A list where a quantity belongs.")
make("wrong-type-bool.ron", S, ("        in_network_reduction: true,", "        in_network_reduction: yes,"), header="`yes` for `true`.")
make("wrong-struct-name.ron", S, ("    scale_up: (", "    scale_up: ScaleUp("), header="A nested struct written with a name tessera does not use.")
make("dims-overflow.ron", S, ("        topology: Switched,\n        size: 72,", "        topology: Torus,\n        size: 72,\n        dims: [4294967296, 4294967296, 4294967296],"), header="Torus dims whose product overflows 64 bits.")
make("devices-overflow.ron", S, ("    nodes: 18,", "    nodes: 1000000000000,"), ("        devices: 4,", "        devices: 4000000000,"), header="10^12 nodes of 4 billion devices.")
write("parts/alias-to-device.ron", '// Alias of the B200 part.\nUse("b200-gb200.ron")\n')
write("alias-of-missing.ron", '// An alias file naming a file that does not exist.\nUse("parts/nowhere.ron")\n')
write("alias-chain-to-broken.ron", '// An alias of an alias of a device with errors.\nUse("parts/alias-to-broken.ron")\n')
write("parts/alias-to-broken.ron", 'Use("broken-device.ron")\n')
write("parts/cycle-to-root.ron", '// Refers back to the system that uses it.\nUse("../reference-back-to-root.ron")\n')
make("reference-back-to-root.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("parts/cycle-to-root.ron")'), header="The device part refers back to this system file.")
make("reference-invalid-utf8.ron", S, ('Use("parts/b200-gb200.ron")', 'Use("parts/latin1-device.ron")'), header="The referenced part is saved as Latin-1.")
write("parts/latin1-device.ron", sub(DEV, 'name: "NVIDIA B200 (GB200, 1200 W)"', 'name: "NVIDIA B200 (GB200, 1200 W) \xe9t\xe9"').encode("latin-1"))
make("node-reference-wrong-kind.ron", S, ('    node: Node(\n        name: "GB200 compute tray",', '    node: Use("parts/b200-gb200.ron"),\n    unused: Node(\n        name: "GB200 compute tray",'), header="The node refers to a Device file (and an unknown field follows).")
a = DEV.index("    die: Die(\n"); b = DEV.index("    memory: [\n")
write("die-reference-missing.ron", "// The die refers to a missing file.\n" + DEV[:a] + '    die: Use("parts/no-such-die.ron"),\n' + DEV[b:])
write("die-part-undeclared-sources.ron", "// The die part cites keys declared only in this file: sources are per file.\n" + DEV[:a] + '    die: Use("parts/blackwell-die.ron"),\n' + DEV[b:])
write("parts/blackwell-die.ron", DEV[a:b].replace("    die: Die(", "Die(\n    version: 1,", 1).rstrip().rstrip(",") + "\n")
write("die-reference-wrong-kind.ron", "// The die refers to a Device file.\n" + DEV[:a] + '    die: Use("parts/b200-gb200.ron"),\n' + DEV[b:])
make("multi-error-across-files.ron", S,
     ('Use("parts/b200-gb200.ron")', 'Use("parts/broken-device.ron")'),
     ("        topology: Switched,\n        size: 72,", "        topology: Torus,\n        size: 72,\n        dims: [4, 4, 4],"),
     ('pue: "1.15 @assumed"', 'pue: "0.95 @assumed"'),
     ("        devices: 4,", "        devices: 5,"),
     header="Errors in this file and in the part it uses, reported together.")
print(len([f for f in os.listdir(out) if f.endswith(".ron")]))
