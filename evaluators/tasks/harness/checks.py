"""lm-eval task definitions that lm-eval itself refuses with a bare exception, turned into messages.

lm-eval builds a task from its YAML with ``TaskConfig(**yaml)`` (an unknown key is a ``TypeError``) and reads
its dataset with ``datasets`` (a file that is not a dataset raises that library's own errors); and a metric a
task lists may be one its ``process_results`` never returns (a ``multiple_choice`` task computes acc, acc_norm
and a few others only). Each is named with the task, not left as a traceback.
"""

from __future__ import annotations

from typing import Any

from evaluators.tasks.harness.loading import Policy, Subtask, load_subtasks
from runner.contract.errors import ConfigError, DataError, UserError


def load_checked(name: str, policy: Policy | None) -> list[Subtask]:
    """:func:`loading.load_subtasks`, with lm-eval's and ``datasets``' bare exceptions as messages."""
    try:
        return load_subtasks(name, policy)
    except UserError:
        raise
    except TypeError as err:  # TaskConfig(**yaml): a key lm-eval does not know
        raise ConfigError("lm-eval refuses the task's definition", where=f"task.lm_eval_task={name}",
                          given=f"TypeError: {' '.join(str(err).split())}"[:300],
                          allowed="the keys of lm-eval's TaskConfig (task, dataset_path, doc_to_text, metric_list, ...)",
                          fix="correct the key in the task's YAML (task.include_path)") from None
    except Exception as err:  # datasets' own errors for data that is not a dataset, a template that does not parse
        raise DataError("lm-eval could not build the task", where=f"task.lm_eval_task={name}",
                        given=f"{type(err).__name__}: {' '.join(str(err).split())}"[:300],
                        fix="check the task's dataset_path, dataset_kwargs and templates in its YAML") from None


def missing_metric(metric: str, values: dict[str, Any], task: str) -> ConfigError:
    """The message for a metric a task lists but its ``process_results`` did not return."""
    return ConfigError("the lm-eval task does not compute this metric for its documents", where="task.metric",
                       given=f"{metric} (task {task}; process_results returned {', '.join(sorted(values)) or 'nothing'})",
                       allowed=", ".join(sorted(values)),
                       fix=f"choose one of those with task.metric=NAME, or drop {metric} from the task's metric_list; "
                           "the answers are in the generation cache, so the rerun asks the model nothing again")
