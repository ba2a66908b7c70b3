"""``p4hub``: look at and steer a running p4hub controller through its job API.

    p4hub [--controller HOST:PORT] status | jobs | job show ID | job kill ID
                                   | switch list | switch show NAME
                                   | doctor [ID] [--settle S]             [--json]
                                   | top [--once] [--interval S] [--doctor-every S]
                                         [--doctor-settle S] [--json]
    p4hub check-topology FILE                  (offline: validate a rack description)

The controller address defaults to $P4HUB_CONTROLLER, else 127.0.0.1:50060.
Credentials (docs/running.md): ``status``, ``jobs``, ``job kill``, ``switch``, ``top``
and ``doctor`` without ID need the controller's administrator token (--admin-token-file
or $P4HUB_ADMIN_TOKEN_FILE; by default the controller's state directory's admin.token
where this user can read it: root's /var/lib/p4hub) or an administrator's client
certificate; ``job show ID`` and ``doctor ID`` take that job's token instead
(--job-token-file, $P4HUB_JOB_TOKEN or $P4HUB_JOB_TOKEN_FILE; never as an argument,
which ps would show). TLS: --ca / $P4HUB_CA (by default the CA a controller on this
machine made, <state dir>/api-tls/ca.pem, where readable), --cert/--key for mutual
TLS, --insecure for a controller started with --insecure.
``doctor`` says what is wrong with a job (every running job without ID) and exits 2
when something is (an error or a warning), 0 when every job it looked at is healthy.
``top`` is a live view of every job, switch and PBox (controller/top.py); ``--once
--json`` prints one view for scripts. For low-level work on one switch use
p4runtime-shell directly (README).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable

import grpc

from p4hub.controller.client import ClientAuth, JobClient, read_secret
from p4hub.controller.core import doctor, topology
from p4hub.controller.core.display import format_value

DEFAULT_CONTROLLER = "127.0.0.1:50060"


def _table(rows: list[list], header: list[str]) -> str:
    cells = [header, *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in cells)


def show_status(reply: dict) -> str:
    lines = [f"jobs: {reply['jobs']}"]
    rows = [[name, s["grpc_addr"], s["device_id"], "up" if s["connected"] else "down",
             f"{s['free_slots']}/{s['slots']}", s["jobs"]] for name, s in reply["switches"].items()]
    lines.append(_table(rows, ["switch", "grpc", "device", "state", "free slots", "jobs"]))
    for name, pb in reply["pboxes"].items():
        lines.append(f"pbox {name}: {pb['free_slots']}/{pb['slots']} slots free")
    return "\n".join(lines)


def show_jobs(reply: dict) -> str:
    rows = [[j["job_id"], j["name"] or "?", f"{j['workers']}/{j['world_size']}", j["where"],
             j["switch"], f"{j['slot_base']}+{j['slot_count']}"] for j in reply["jobs"]]
    text = _table(rows, ["id", "name", "workers", "where", "rack", "slots"]) if rows else "no jobs"
    ended = reply.get("ended") or []
    if ended:
        text += "\nrecently ended:\n" + "\n".join(
            f"  {e['job_id']} {e['name'] or '?'}: {_ago(e['ended_s_ago'])}{e['reason']}"
            for e in ended)
    return text


def _ago(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds:.1f} s ago: "


def show_job(reply: dict) -> str:
    if reply.get("state") == "ended":
        return show_ended_job(reply)
    where = reply["where"] + (f" (PBox {reply['pbox']})" if reply["where"] == "pbox" else "")
    lines = [
        f"job {reply['job_id']} {reply['name'] or '?'}: {reply['workers']}/{reply['world_size']} "
        f"workers, rack {reply['switch']}, aggregated on {where}, slots "
        f"{reply['slot_base']}..{reply['slot_base'] + reply['slot_count'] - 1}"
        + (f", precision {reply['precision']:g} (blocks beyond it go as float32 to the PBox)"
           if reply.get("precision") is not None else ""),
        _table([[w["rank"], w["address"], w["mac"], w.get("switch", "-"), w["switch_port"],
                 w["idle_s"]] for w in reply["worker_list"]],
               ["rank", "address", "mac", "switch", "port", "idle s"]),
        _table([[kind, c["packets"], c["bytes"]] for kind, c in reply["counters"].items()],
               ["counter", "packets", "bytes"]),
    ]
    service = reply.get("service") or {}
    if service.get("result_bytes_per_s") is not None:
        ratio = service.get("resend_ratio")
        lines.insert(1, f"service: {service['result_bytes_per_s'] / 1e6:.3f} MB/s of results per "
                        f"worker" + ("" if ratio is None else f", {100 * ratio:.1f}% resends")
                        + " (moving average over the workers' heartbeats)")
    if len(reply.get("map") or []) > 1:
        lines.append(f"aggregator map (epoch {reply['epoch']}; rate: rounds/s while busy, "
                     "from the agents):")
        lines.append(_table([[a["aggregator"], a["address"],
                              f"{a['slot_base']}..{a['slot_base'] + a['count'] - 1}", a["count"],
                              "-" if a["rounds_per_s"] is None else f"{a['rounds_per_s']:.0f}"]
                             for a in reply["map"]],
                            ["aggregator", "address", "slots", "window", "rate"]))
        if any(a.get("float") for a in reply["map"]):
            lines.append("(float blocks: the precision option's float32 blocks of the switch's "
                         "window slots, on slot base + window index; not part of the window)")
    if reply.get("tree"):
        lines.append("aggregation tree (the root sums the leaves' partials; per-switch packets):")
        lines.append(_table([[t["switch"], t["level"], t.get("child", "-"),
                              t.get("workers", t.get("children")), c["contributions"],
                              c["completions"], c.get("partials_up", "-"),
                              c.get("partials_resent", "-"), c.get("results_down", "-"),
                              c["resent"]] for t in reply["tree"] for c in [t["counters"]]],
                            ["switch", "level", "child", "members", "contribs", "complete",
                             "up", "up again", "down", "resent"]))
    if reply.get("moves"):
        lines.append(f"epoch {reply['epoch']}; aggregator changes (agents resynchronised):")
        lines.append(_table([["" if m["s_ago"] is None else f"{m['s_ago']:.1f}", m["epoch"],
                              m["where"], m["slot_base"], m["reason"]] for m in reply["moves"]],
                            ["s ago", "epoch", "on", "slot base", "why"]))
    return "\n".join(lines)


def show_ended_job(reply: dict) -> str:
    when = "" if reply["ended_s_ago"] is None else f" {reply['ended_s_ago']:.1f} s ago"
    last = reply["slot_base"] + reply["slot_count"] - 1
    return (f"job {reply['job_id']} {reply['name'] or '?'}: ended{when}: {reply['reason']}\n"
            f"its slots {reply['slot_base']}..{last} on {reply['where']} (rack {reply['switch']}) "
            "were freed; a worker that rejoins by name starts a new job")


def show_switches(reply: dict) -> str:
    return _table([[name, s["grpc_addr"], s["device_id"], "up" if s["connected"] else "down"]
                   for name, s in reply["switches"].items()], ["switch", "grpc", "device", "state"])


def show_switch(reply: dict) -> str:
    lines = [f"switch {reply['name']}", "tables:"]
    for e in reply["entries"]:
        match_bits, param_bits = e.get("match_bits", {}), e.get("param_bits", {})
        match = " ".join(f"{k}={format_value(k, match_bits.get(k), v, hex_numbers=True)}"
                         for k, v in e["match"].items())
        params = ", ".join(f"{k}={format_value(k, param_bits.get(k), v, hex_numbers=False)}"
                           for k, v in e["params"].items())
        lines.append(f"  {e['table']}  {match}  -> {e['action']}({params})")
    lines.append("multicast groups:")
    for group, replicas in reply["groups"].items():
        lines.append(f"  {group}: " + " ".join(f"{r['port']}/{r['rid']}" for r in replicas))
    lines.append(_table([[port, info["node"], info["rx"]["packets"], info["rx"]["bytes"],
                          info["tx"]["packets"], info["tx"]["bytes"]]
                         for port, info in reply["ports"].items()],
                        ["port", "node", "rx pkts", "rx bytes", "tx pkts", "tx bytes"]))
    return "\n".join(lines)


def show_doctor(reply: dict) -> str:
    if not reply["reports"]:
        return "no running jobs"
    return "\n\n".join(doctor.render(report) for report in reply["reports"])


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print the raw reply as JSON")
    parser = argparse.ArgumentParser(prog="p4hub", description="p4hub controller client")
    # a separate dest: subcommand defaults would overwrite a shared one
    parser.add_argument("--json", dest="json_first", action="store_true")
    parser.add_argument("--controller", default=os.environ.get("P4HUB_CONTROLLER",
                                                               DEFAULT_CONTROLLER))
    parser.add_argument("--admin-token-file", help="the controller's administrator token "
                        "(default $P4HUB_ADMIN_TOKEN_FILE, else <state dir>/admin.token)")
    parser.add_argument("--job-token-file", help="a file holding a job's token (default "
                        "$P4HUB_JOB_TOKEN, $P4HUB_JOB_TOKEN_FILE)")
    parser.add_argument("--ca", help="CA certificate of the controller's (default $P4HUB_CA)")
    parser.add_argument("--cert", help="client certificate, mutual TLS ($P4HUB_CLIENT_CERT)")
    parser.add_argument("--key", help="its private key ($P4HUB_CLIENT_KEY)")
    parser.add_argument("--insecure", action="store_true",
                        help="plaintext, for a controller started with --insecure")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("status", parents=[common])
    sub.add_parser("jobs", parents=[common])
    job = sub.add_parser("job").add_subparsers(dest="action", required=True)
    for action in ("show", "kill"):
        job.add_parser(action, parents=[common]).add_argument("job_id", type=int)
    switch = sub.add_parser("switch").add_subparsers(dest="action", required=True)
    switch.add_parser("list", parents=[common])
    switch.add_parser("show", parents=[common]).add_argument("name")
    doctor_cmd = sub.add_parser("doctor", parents=[common],
                                help="what is wrong with a job (every running job without ID)")
    doctor_cmd.add_argument("job_id", type=int, nargs="?")
    doctor_cmd.add_argument("--settle", type=float, default=1.0,
                            help="seconds between the two reads of the slot state (default 1)")
    top_cmd = sub.add_parser("top", parents=[common],
                             help="a live view of the jobs, switches and PBoxes (Ctrl-C quits)")
    top_cmd.add_argument("--once", action="store_true", help="print one view and exit")
    top_cmd.add_argument("--interval", type=float, default=1.0,
                         help="seconds between views (default 1)")
    top_cmd.add_argument("--doctor-every", type=float, default=5.0,
                         help="seconds between the doctor's checks (default 5; 0: never)")
    top_cmd.add_argument("--doctor-settle", type=float, default=1.0,
                         help="seconds between the doctor's two reads of the slot state "
                         "(default 1, as p4hub doctor; 0: one read, which takes cells in "
                         "flight for stuck ones)")
    check = sub.add_parser("check-topology", parents=[common],
                           help="validate a topology file (no controller needed)")
    check.add_argument("path")
    return parser


def check_topology(path: str, as_json: bool) -> int:
    """Faucet's check_config: validate offline, report every problem at once."""
    try:
        topo = topology.load(path)
    except topology.ConfigError as exc:
        if as_json:
            print(json.dumps({"ok": False, "errors": exc.errors}, indent=2))
        else:
            print(exc, file=sys.stderr)
        return 1
    summary = {"ok": True, "switches": sorted(topo.switches), "hosts": len(topo.hosts),
               "pboxes": sorted(topo.pboxes)}
    print(json.dumps(summary, indent=2) if as_json else
          f"{path}: ok ({len(topo.switches)} switch(es), {len(topo.hosts)} host(s), "
          f"{len(topo.pboxes)} PBox(es))")
    return 0


def _request(args: argparse.Namespace) -> tuple[str, dict, Callable[[dict], str]]:
    if args.command == "status":
        return "Status", {}, show_status
    if args.command == "jobs":
        return "ListJobs", {}, show_jobs
    if args.command == "job":
        if args.action == "show":
            return "ShowJob", {"job_id": args.job_id}, show_job
        return "KillJob", {"job_id": args.job_id}, lambda _: f"job {args.job_id} killed"
    if args.command == "doctor":
        request = {"settle": args.settle}
        if args.job_id is not None:
            request["job_id"] = args.job_id
        return "Doctor", request, show_doctor
    if args.action == "list":
        return "Status", {}, show_switches
    return "ShowSwitch", {"name": args.name}, show_switch


def client_auth(args: argparse.Namespace) -> ClientAuth:
    """The environment's credentials (``ClientAuth.from_env``), overridden by the options;
    OSError for a file that cannot be read."""
    env = dict(os.environ)
    for option, variable in (("admin_token_file", "P4HUB_ADMIN_TOKEN_FILE"), ("ca", "P4HUB_CA"),
                             ("cert", "P4HUB_CLIENT_CERT"), ("key", "P4HUB_CLIENT_KEY")):
        if getattr(args, option):
            env[variable] = getattr(args, option)
    auth = ClientAuth.from_env(env)
    if args.job_token_file:
        auth = dataclasses.replace(auth, job_token=read_secret(args.job_token_file))
    if args.insecure or env.get("P4HUB_INSECURE") == "1":
        auth = dataclasses.replace(auth, ca=None, cert=None, key=None)
    return auth


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check-topology":
        return check_topology(args.path, args.json or args.json_first)
    if args.command == "top":
        return _top(args)
    method, request, render = _request(args)
    client = _open_client(args)
    if client is None:
        return 1
    try:
        reply = client.call(method, **request)
    except grpc.RpcError as exc:
        print(f"p4hub: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    finally:
        client.close()
    as_json = args.json or args.json_first
    print(json.dumps(reply, indent=2, sort_keys=True) if as_json else render(reply))
    if method == "Doctor" and not all(r["healthy"] for r in reply["reports"]):
        return 2
    return 0


def _open_client(args: argparse.Namespace) -> JobClient | None:
    """The job API's client with the credentials ``args`` and the environment give; None
    (the reason printed) when a credential file cannot be read."""
    try:
        return JobClient(args.controller, timeout=10.0, auth=client_auth(args))
    except OSError as exc:
        print(f"p4hub: credentials: {exc}", file=sys.stderr)
        return None


def _top(args: argparse.Namespace) -> int:
    from p4hub.controller import top  # rich is imported only for this command

    if args.interval <= 0 or args.doctor_every < 0 or args.doctor_settle < 0:
        print("p4hub: --interval must be > 0, --doctor-every and --doctor-settle >= 0",
              file=sys.stderr)
        return 1
    client = _open_client(args)
    if client is None:
        return 1
    try:
        return top.run(client.call, once=args.once, as_json=args.json or args.json_first,
                       interval=args.interval, doctor_every=args.doctor_every,
                       doctor_settle=args.doctor_settle)
    except grpc.RpcError as exc:
        print(f"p4hub: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
