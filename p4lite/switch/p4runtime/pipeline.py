"""One committed forwarding pipeline: the core, its P4Info index and the digest buffer."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2

from p4lite.switch.core.errors import SwitchError
from p4lite.switch.core.runtime_api import RuntimeOps
from p4lite.switch.p4runtime.device_config import DeviceConfig, decode_device_config
from p4lite.switch.p4runtime.digest import DigestBuffer
from p4lite.switch.p4runtime.errors import invalid
from p4lite.switch.p4runtime.p4info import P4InfoIndex, build_index

CoreFactory = Callable[[dict], RuntimeOps]


@dataclass(slots=True)
class Pipeline:
    core: RuntimeOps
    index: P4InfoIndex
    config: p4runtime_pb2.ForwardingPipelineConfig
    device_config: DeviceConfig
    digests: DigestBuffer = field(default_factory=DigestBuffer)
    digest_names: dict[str, int] = field(default_factory=dict)  # core learn-list name -> P4Info id
    # False for a program loaded from the command line: it forwards packets, but
    # P4Runtime has no P4Info for it until a controller sets a pipeline.
    p4runtime_ready: bool = True

    def digest_id_for(self, name: str, list_id: int) -> int | None:
        """The P4Info digest for a learn list the core reported."""
        found = self.digest_names.get(name)
        if found is None:
            found = _match_digest_name(self.index, name, list_id)
            if found is not None:
                self.digest_names[name] = found
        return found


def build_pipeline(config: p4runtime_pb2.ForwardingPipelineConfig,
                   core_factory: CoreFactory) -> Pipeline:
    """Verify a ForwardingPipelineConfig and build a fresh core for it (INVALID_ARGUMENT if the loader refuses it)."""
    device_config = decode_device_config(config.p4_device_config)
    core = _make_core(core_factory, device_config.bmv2_json)
    index = build_index(config.p4info, device_config.bmv2_json)
    saved = p4runtime_pb2.ForwardingPipelineConfig()
    saved.CopyFrom(config)
    return Pipeline(core, index, saved, device_config)


def cli_pipeline(bmv2_json: dict, core_factory: CoreFactory) -> Pipeline:
    """The program given as PROG.json on the command line (dataplane only)."""
    raw = json.dumps(bmv2_json).encode()
    config = p4runtime_pb2.ForwardingPipelineConfig(p4_device_config=raw)
    core = _make_core(core_factory, bmv2_json)
    index = build_index(config.p4info, {})
    return Pipeline(core, index, config, DeviceConfig(bmv2_json, raw, False), p4runtime_ready=False)


def _make_core(core_factory: CoreFactory, bmv2_json: dict) -> RuntimeOps:
    """A core for the JSON; the loader's refusal is INVALID_ARGUMENT with its message.
    Anything else the factory raises is a bug and propagates (the server answers INTERNAL)."""
    try:
        return core_factory(bmv2_json)
    except SwitchError as exc:
        raise invalid(f"the switch rejected the BMv2 JSON: {exc}") from None


def _match_digest_name(index: P4InfoIndex, name: str, list_id: int) -> int | None:
    if name in index.digest_ids:
        return index.digest_ids[name]
    # p4c names the P4Info digest after the struct type; the JSON learn list may be
    # qualified differently: accept a unique suffix match either way.
    candidates = [d for n, d in index.digest_ids.items()
                  if n.endswith("." + name) or name.endswith("." + n) or name.endswith(n)]
    if len(candidates) == 1:
        return candidates[0]
    if len(index.digests) == 1:
        return next(iter(index.digests))
    return None
