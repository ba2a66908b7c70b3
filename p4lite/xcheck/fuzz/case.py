"""One fuzz case: a program (with some statements kept), entries and packets, run on
p4lite in-process and then, with p4lite's outputs as the STF's expectations, on real
p4c-bm2-ss + simple_switch through p4c's STF runner.

A run of the reference that fails is a difference; p4c's runner keeps its temporary
folder then, and the ``*_out.pcap`` files in it hold what BMv2 really sent, which
become the expectations of the reproducer written for it.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from p4lite.compiler.driver import compile_file
from p4lite.compiler.errors import CompileError
from p4lite.stf.commands import PacketCmd, StfFile
from p4lite.stf.harness import make_switch
from p4lite.stf.parser import parse_stf
from p4lite.stf.program import ProgramInfo
from p4lite.stf.runner import StfRunner
from p4lite.xcheck import runs
from p4lite.xcheck.fuzz.gen_packets import Entry, Packet, render_stf
from p4lite.xcheck.fuzz.spec import ProgramSpec
from p4lite.xcheck.tools import Tools

SAME, DIFFERENT, LITE_REFUSED, P4C_REFUSED, LITE_CRASH, REF_ERROR = (
    "same", "different", "p4lite refused", "p4c refused", "p4lite crashed", "reference error")
# the same packets on each port in another order, in a program that resubmits,
# recirculates or clones: simple_switch's second pass (or clone) queues behind later
# packets
REORDERED = "same, reordered by a second pass"


@dataclass
class Case:
    spec: ProgramSpec
    keep: list[int]  # indices of the ingress statements kept
    entries: list[Entry]
    packets: list[Packet]

    def source(self) -> str:
        return self.spec.render(self.keep)

    def live_entries(self) -> list[Entry]:
        """The entries of tables the kept statements apply (others are not in the JSON)."""
        applied = {t.name for t in self.spec.applied_tables(self.keep)}
        return [e for e in self.entries if e.table in applied]

    def with_(self, **changes) -> Case:
        return replace(self, **changes)


@dataclass
class Verdict:
    kind: str
    reason: str = ""
    outputs: list[list[tuple[int, bytes]]] = field(default_factory=list)
    ref_outputs: dict[int, list[bytes]] = field(default_factory=dict)
    seconds: float = 0.0


def _record(runner: StfRunner, stf: StfFile) -> list[list[tuple[int, bytes]]]:
    """Run ``stf`` (entries and packets only), recording each packet's outputs."""
    per_packet: list[list[tuple[int, bytes]]] = []
    for command in stf.commands:
        if isinstance(command, PacketCmd):
            outputs = runner.switch.process(command.data, command.port, len(per_packet))
            per_packet.append([(port, bytes(data)) for port, data in outputs])
        else:
            runner._execute(command)  # noqa: SLF001 - the runner's own add/setdefault
    return per_packet


def run_p4lite(case: Case, workdir: Path) -> Verdict:
    """p4lite-c and p4lite's switch on the case: each packet's outputs, or why not."""
    workdir.mkdir(parents=True, exist_ok=True)
    p4 = workdir / "prog.p4"
    p4.write_text(case.source(), encoding="utf-8")
    try:
        compiled = compile_file(str(p4))
    except CompileError as exc:
        return Verdict(LITE_REFUSED, str(exc).splitlines()[0])
    model = compiled.bmv2_program
    assert model is not None
    stf = parse_stf(render_stf(case.live_entries(), case.packets, None, case.spec.setup),
                    "fuzz.stf")
    try:
        runner = StfRunner(make_switch(model), ProgramInfo(model), "fuzz.stf")
        outputs = _record(runner, stf)
    except Exception as exc:  # noqa: BLE001 - any switch failure is a finding
        return Verdict(LITE_CRASH, f"{type(exc).__name__}: {exc}")
    return Verdict(SAME, outputs=outputs)


def run_reference(tools: Tools, case: Case, lite: Verdict, workdir: Path,
                  timeout: float) -> Verdict:
    """p4c + BMv2 on the case, expecting p4lite's outputs."""
    stf_text = render_stf(case.live_entries(), case.packets, lite.outputs, case.spec.setup)
    (workdir / "fuzz.stf").write_text(stf_text, encoding="utf-8")
    pair = runs.Pair("fuzz", workdir / "prog.p4", workdir / "fuzz.stf")
    ref_dir = workdir / "ref"
    outcome = runs.run_on_bmv2(tools, pair, ref_dir, timeout)
    if outcome.ok:
        return Verdict(SAME, outputs=lite.outputs, seconds=outcome.seconds)
    if outcome.status == runs.ERROR:
        kind = P4C_REFUSED if outcome.reason.startswith("compile:") else REF_ERROR
        return Verdict(kind, outcome.reason, lite.outputs, seconds=outcome.seconds)
    ref = _bmv2_outputs(ref_dir)
    if (case.spec.again or case.spec.setup) and same_frames(lite.outputs, ref):
        return Verdict(REORDERED, outcome.reason, lite.outputs, ref, outcome.seconds)
    return Verdict(DIFFERENT, outcome.reason, lite.outputs, ref, outcome.seconds)


def same_frames(outputs: list[list[tuple[int, bytes]]], ref: dict[int, list[bytes]]) -> bool:
    """Whether p4lite's outputs (per packet) and BMv2's (per port) hold the same frames
    on each port, in whatever order."""
    mine = Counter((port, data) for packet in outputs for port, data in packet)
    return mine == Counter((port, data) for port, frames in ref.items() for data in frames)


def check(tools: Tools, case: Case, workdir: Path, timeout: float) -> Verdict:
    lite = run_p4lite(case, workdir)
    if lite.kind == LITE_REFUSED:
        p4c = runs.compile_with_p4c(tools, workdir / "prog.p4", workdir / "p4c.json", timeout)
        return lite if p4c.ok else Verdict(P4C_REFUSED, "both refuse: " + lite.reason)
    if lite.kind != SAME:
        return lite
    return run_reference(tools, case, lite, workdir, timeout)


def _bmv2_outputs(ref_dir: Path) -> dict[int, list[bytes]]:
    """What BMv2 sent on each port: the ``N_out.pcap`` files p4c's runner kept."""
    out: dict[int, list[bytes]] = {}
    for pcap in sorted(ref_dir.glob("tmp*/**/*_out.pcap")):
        port_text = pcap.name.removesuffix("_out.pcap").rsplit("_", 1)[-1]
        digits = "".join(c for c in port_text if c.isdigit())
        if digits:
            out[int(digits)] = read_pcap(pcap)
    return out


def read_pcap(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    frames, pos = [], 24
    while pos + 16 <= len(data):
        incl = struct.unpack(endian + "IIII", data[pos:pos + 16])[2]
        frames.append(data[pos + 16:pos + 16 + incl])
        pos += 16 + incl
    return frames
