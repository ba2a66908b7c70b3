"""``python -m p4lite.xcheck --fuzz N [--seed S]``: N random programs, each with its
entries and a batch of packets, run on p4lite and on real p4c + BMv2.

Case ``i`` is drawn from seed ``S + i`` alone, so ``--fuzz 1 --seed S+i`` reruns it.
A difference is minimised (``minimize.py``) and written under ``OUT/found/`` as a
``fuzz_<seed>.p4`` + ``.stf`` pair whose expectations are what BMv2 sent (so it
passes on p4c + BMv2 and fails on p4lite until p4lite is fixed); ``--pairs-dir``
writes it there too (``tests/p4`` to keep it as a regression pair).
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from p4lite.xcheck import runs
from p4lite.xcheck.fuzz import case as fc
from p4lite.xcheck.fuzz.gen_packets import Packet, entries_for, packets_for, render_stf
from p4lite.xcheck.fuzz.gen_program import generate
from p4lite.xcheck.fuzz.minimize import Budget, minimize
from p4lite.xcheck.tools import Tools

FINDINGS = (fc.DIFFERENT, fc.LITE_CRASH, fc.LITE_REFUSED, fc.P4C_REFUSED)


@dataclass
class Settings:
    count: int
    seed: int
    packets: int = 24
    jobs: int = 2
    timeout: float = 120.0
    budget: int = 40  # reference runs per minimisation
    out: Path = Path("build/xcheck/fuzz")
    pairs_dir: Path | None = None


@dataclass
class Summary:
    kinds: Counter = field(default_factory=Counter)
    programs: int = 0  # compared on both
    packets: int = 0  # compared on both
    coverage: Counter = field(default_factory=Counter)
    findings: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        per_min = 60.0 / self.seconds if self.seconds else 0.0
        found = sum(self.kinds[k] for k in FINDINGS)
        return (f"fuzz: {self.programs} programs x packets = {self.packets} compared "
                f"({self.programs * per_min:.1f} programs, {self.packets * per_min:.0f} packets "
                f"per minute); {found} difference(s); "
                + ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items())))


def make_case(seed: int, packets: int) -> fc.Case:
    spec = generate(seed)
    rng = random.Random(seed ^ 0x5EED)
    entries = entries_for(spec, spec.applied_tables(), rng)
    return fc.Case(spec, list(range(len(spec.stmts))), entries,
                   packets_for(spec, entries, rng, packets))


def _one(tools: Tools, st: Settings, seed: int) -> tuple[fc.Case, fc.Verdict]:
    case = make_case(seed, st.packets)
    work = st.out / "work" / str(seed)
    verdict = fc.check(tools, case, work, st.timeout)
    if verdict.kind == fc.REF_ERROR:  # a Thrift port taken by a parallel run: once more
        shutil.rmtree(work, ignore_errors=True)
        verdict = fc.check(tools, case, work, st.timeout)
    return case, verdict


def run_campaign(tools: Tools, st: Settings) -> Summary:
    summary = Summary()
    shutil.rmtree(st.out / "work", ignore_errors=True)
    start = time.monotonic()
    seeds = range(st.seed, st.seed + st.count)
    with ThreadPoolExecutor(max_workers=max(1, st.jobs)) as pool:
        for seed, (case, verdict) in zip(seeds, pool.map(lambda s: _one(tools, st, s), seeds),
                                         strict=True):
            summary.kinds[verdict.kind] += 1
            summary.coverage.update(case.spec.coverage)
            summary.coverage["table entries (STF add)"] += len(case.live_entries())
            if verdict.kind in (fc.SAME, fc.REORDERED, fc.DIFFERENT):
                summary.programs += 1
                summary.packets += len(case.packets)
            if verdict.kind in FINDINGS:
                print(f"  seed {seed}: {verdict.kind}: {verdict.reason}", flush=True)
                summary.findings.append(_finding(tools, st, seed, case, verdict))
            else:
                shutil.rmtree(st.out / "work" / str(seed), ignore_errors=True)
            done = sum(summary.kinds.values())
            if done % 25 == 0:
                print(f"  [{done}/{st.count}] {dict(summary.kinds)}", flush=True)
    summary.seconds = time.monotonic() - start
    _write_report(st, summary)
    return summary


def _finding(tools: Tools, st: Settings, seed: int, case: fc.Case, verdict: fc.Verdict) -> dict:
    info: dict = {"seed": seed, "kind": verdict.kind, "reason": verdict.reason}
    if verdict.kind != fc.DIFFERENT:
        return info
    work = st.out / "work" / f"{seed}-min"

    def differs(c: fc.Case) -> bool:
        shutil.rmtree(work, ignore_errors=True)
        return fc.check(tools, c, work, st.timeout).kind == fc.DIFFERENT

    small = minimize(case, differs, Budget(st.budget))
    shutil.rmtree(work, ignore_errors=True)
    final = fc.check(tools, small, work, st.timeout)
    if final.kind != fc.DIFFERENT:  # a flaky reference run: keep the whole case
        small, final = case, verdict
    name = f"fuzz_{seed}"
    pair = _write_pair(st.out / "found", name, small, final)
    if st.pairs_dir is not None:
        st.pairs_dir.mkdir(parents=True, exist_ok=True)
        for path in pair:
            shutil.copyfile(path, st.pairs_dir / path.name)
    way3 = runs.run_p4c_json_on_p4lite(tools, runs.Pair(name, pair[0], pair[1]),
                                       work / "way3", st.timeout)
    info.update(reproducer=str(pair[0]), statements=len(small.keep),
                packets=len(small.packets), entries=len(small.live_entries()),
                p4c_json_on_p4lite=way3.status,
                blame="p4lite-c" if way3.ok else "p4lite switch (or both)")
    print(f"  seed {seed}: minimised to {pair[0]} ({len(small.keep)} statements, "
          f"{len(small.packets)} packets); p4c's JSON on p4lite: {way3.status}", flush=True)
    return info


def _write_pair(folder: Path, name: str, case: fc.Case, verdict: fc.Verdict
                ) -> tuple[Path, Path]:
    """The reproducer: the program, and an STF expecting what BMv2 sent."""
    folder.mkdir(parents=True, exist_ok=True)
    p4 = folder / f"{name}.p4"
    stf = folder / f"{name}.stf"
    head = (f"// Found by python -m p4lite.xcheck --fuzz 1 --seed {case.spec.seed} "
            "(minimised).\n// p4lite differed from p4c + BMv2: " + verdict.reason + "\n")
    p4.write_text(head + case.source(), encoding="utf-8")
    text = render_stf(case.live_entries(), case.packets, None, case.spec.setup)
    expects = [f"expect {port} {data.hex().upper()} $"
               for port, frames in sorted(verdict.ref_outputs.items()) for data in frames]
    stf.write_text("# expectations: what BMv2 (simple_switch) sent\n" + text
                   + "\n".join(expects) + ("\n" if expects else ""), encoding="utf-8")
    return p4, stf


def _write_report(st: Settings, summary: Summary) -> None:
    st.out.mkdir(parents=True, exist_ok=True)
    data = {
        "seed": st.seed, "count": st.count, "packets_per_program": st.packets,
        "kinds": dict(summary.kinds), "programs_compared": summary.programs,
        "packets_compared": summary.packets, "seconds": round(summary.seconds, 1),
        "coverage": dict(sorted(summary.coverage.items())), "findings": summary.findings,
    }
    (st.out / "fuzz-report.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


__all__ = ["Packet", "Settings", "Summary", "make_case", "run_campaign"]
