"""Every config schema in Hydra's ConfigStore, registered explicitly by the entry points.

Each option file under ``conf/<group>/`` starts its defaults list with the matching schema
(``/schema_<group>[_<kind>]@_here_``; top-level names, so ``--help`` does not list them as groups),
so a wrong type or an unknown key is rejected at composition time with the key's full name.
Task schemas are found by listing the task modules (``evaluators/tasks/<name>``: its ``CONFIG``
becomes ``schema_task_<name>``), so adding a task touches no central file. Nothing is registered
as a side effect of an import.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from hydra.core.config_store import ConfigStore

import evaluators.tasks
from runner.backends.fake import FakeBackendConfig
from runner.backends.hf.config import HFBackendConfig
from runner.backends.openai.config import OpenAIBackendConfig
from runner.backends.trtllm.engine import TRTLLMBackendConfig
from runner.backends.trtllm.pytorch import TRTLLMPyTorchBackendConfig
from runner.cache.generations import CacheConfig
from runner.config.resolvers import register_resolvers as register_path_resolvers
from runner.config.schemas import RunnerConfig
from runner.contract.task_config import ModelConfig, QuantConfig
from runner.quant.export import QuantizeJobConfig
from runner.sweep.gpus import register_resolvers
from runner.sweep.policy import GateConfig
from runner.tracking.trackers import MlflowTrackingConfig, NoTrackingConfig


def task_schemas() -> dict[str, type]:
    """``schema_task_<module>`` -> the ``CONFIG`` dataclass of each module or package under evaluators/tasks."""

    out = {}
    for info in pkgutil.iter_modules(evaluators.tasks.__path__):
        module = importlib.import_module(f"evaluators.tasks.{info.name}")
        config = getattr(module, "CONFIG", None)
        if config is not None:
            out[f"schema_task_{info.name}"] = config
    return out


def schemas() -> dict[str, type]:

    return {
        "schema_model": ModelConfig,
        "schema_quant": QuantConfig,
        "schema_backend_hf": HFBackendConfig,
        "schema_backend_fake": FakeBackendConfig,
        "schema_backend_openai": OpenAIBackendConfig,
        "schema_backend_trtllm": TRTLLMBackendConfig,
        "schema_backend_trtllm_pytorch": TRTLLMPyTorchBackendConfig,
        "schema_tracking_mlflow": MlflowTrackingConfig,
        "schema_tracking_none": NoTrackingConfig,
        "schema_cache": CacheConfig,
        "schema_gate": GateConfig,
    } | task_schemas()


@functools.cache
def register_schemas() -> None:
    """Store every schema in Hydra's ConfigStore (called by the entry points, never on import). Once per
    process: the store is a process-wide singleton that nothing clears, and registering again (a tenth of
    a second) is paid by every job a process composes, the test suite's in-process jobs among them."""

    share_config_store_across_repositories()
    cs = ConfigStore.instance()
    cs.store(name="runner_schema", node=RunnerConfig)
    cs.store(name="quantize_schema", node=QuantizeJobConfig)
    for name, node in schemas().items():
        cs.store(name=name, node=node)
    register_resolvers()  # conf/hydra/launcher/joblib_gpu.yaml needs ${runner.gpu_count:}
    register_path_resolvers()  # conf/config.yaml's output directories


def share_config_store_across_repositories() -> None:
    """Hydra deep-copies its config repository, ConfigStore singleton included, every time it lists
    a group's options (85 times for ``--help``: 1.9 s of the 2 s it took). The store is a
    singleton and hands out a deep copy of a node on every load, so the copies gain nothing: the
    singleton is kept shared instead."""

    if "__deepcopy__" not in vars(ConfigStore):
        ConfigStore.__deepcopy__ = lambda self, memo: self  # type: ignore[attr-defined]
