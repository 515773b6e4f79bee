"""lm-eval's prompt templates (``doc_to_text``, ``doc_to_target``, ``doc_to_choice``, ``description``,
``gen_prefix``, the few-shot ones) rendered in Jinja's immutable sandbox, bounded in output and in time.

A template is a plain string in a task file. In lm-eval's own environment ``{{ cycler.__init__.__globals__
.os.system(...) }}`` runs anything; the sandbox refuses private attributes, unsafe calls and mutation. Its
output is at most :data:`TEMPLATE_MAX_CHARS` characters, and each render is bounded by
:func:`runner.contract.deadline.within` (:data:`TEMPLATE_MAX_S`): a loop that emits nothing, a recursive macro
and lm-eval's ``regex_replace`` filter over a catastrophic pattern are interrupted where they run. ``**`` and
``*`` are checked before they run (one such operation is a single step of the interpreter that no signal
stops), and are not folded while the template compiles. Prompts built from data render as before.

A refusal names the task and the template field: lm-eval's task methods that render are wrapped to say
which task renders, and the field is the one of the task's config that holds the template's text.
"""

from __future__ import annotations

import dataclasses
import functools
from contextvars import ContextVar
from typing import Any, Callable

from runner.contract.deadline import Overran, within
from runner.contract.errors import ConfigError

TEMPLATE_MAX_CHARS = 1 << 20
"""A prompt rendered from one document is far below a million characters; a template loop is not."""
TEMPLATE_MAX_S = 10.0
"""Per render (one field of one document)."""
RENDERING_METHODS = ("__init__", "fewshot_context", "doc_to_text", "doc_to_target", "doc_to_choice",
                     "doc_to_prefix", "doc_to_image", "doc_to_audio", "doc_to_decontamination_query")
"""lm-eval's ``ConfigurableTask`` methods that render templates (``__init__`` renders the first document)."""
_task: ContextVar[Any] = ContextVar("rendering_task", default=None)
_source: ContextVar[str] = ContextVar("rendering_source", default="")
_installed = {"done": False}


def sandbox_templates() -> None:
    """Install the bounded sandbox as lm-eval's template environment (once per process)."""
    if _installed["done"]:
        return
    import lm_eval.utils
    from lm_eval.api.task import ConfigurableTask

    for name in RENDERING_METHODS:
        setattr(ConfigurableTask, name, _naming(getattr(ConfigurableTask, name)))
    current = lm_eval.utils.env
    sandbox = _sandbox_class()(loader=current.loader, undefined=current.undefined,
                               keep_trailing_newline=current.keep_trailing_newline)
    sandbox.filters.update(current.filters)
    lm_eval.utils.env = sandbox
    _installed["done"] = True


def _naming(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def rendering(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = _task.set(self)
        try:
            return method(self, *args, **kwargs)
        finally:
            _task.reset(token)
    return rendering


def rendered_where() -> str:
    """The task and the config field whose template renders now, as far as they are known."""
    task, source = _task.get(), _source.get()
    if task is None:
        return "a template of an lm-eval task (doc_to_text, doc_to_target, doc_to_choice, ...)"
    config = task.config
    fields = [f.name for f in dataclasses.fields(config) if source and getattr(config, f.name) == source]
    fewshot = config.fewshot_config if isinstance(config.fewshot_config, dict) else {}
    fields += [f"fewshot_config.{k}" for k, v in fewshot.items() if source and v == source]
    return f"task {config.task}: template {' / '.join(fields) or '(doc_to_text, doc_to_target, doc_to_choice, ...)'}"


def _refused(what: str, given: str, allowed: str | None = None, fix: str | None = None) -> ConfigError:
    return ConfigError(what, where=rendered_where(), given=given, allowed=allowed,
                       fix=fix or "templates may read the document's fields and call Jinja's filters")


def _sandbox_class() -> type:
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError  # lazy: comes with lm-eval

    class Bounded(ImmutableSandboxedEnvironment.template_class):  # type: ignore[misc, name-defined]
        source_text = ""

        def render(self, *args: Any, **kwargs: Any) -> str:
            """The output, chunk by chunk within :data:`TEMPLATE_MAX_CHARS`, all of it within :data:`TEMPLATE_MAX_S`."""
            size, out, token = 0, [], _source.set(self.source_text)
            try:
                with within(TEMPLATE_MAX_S):
                    for chunk in self.generate(*args, **kwargs):
                        size += len(chunk)
                        out.append(chunk)
                        if size > TEMPLATE_MAX_CHARS:
                            raise _refused("an lm-eval prompt template renders too much", f"over {size} characters",
                                           f"at most {TEMPLATE_MAX_CHARS} characters per document",
                                           "remove the loop that repeats the output")
            except Overran as err:
                raise _refused("an lm-eval prompt template renders for too long", f"{err} ({self.source_text[:120]!r})",
                               f"at most {TEMPLATE_MAX_S:.0f} s per field and document",
                               "remove the loop (or the regex_replace pattern with nested repetition, such as "
                               "(a+)+) that keeps the template running") from None
            finally:
                _source.reset(token)
            return "".join(out)

    class Sandbox(ImmutableSandboxedEnvironment):
        template_class = Bounded
        intercepted_binops = frozenset({"*", "**"})  # checked below, and never folded at compile time

        def from_string(self, source: Any, *args: Any, **kwargs: Any) -> Any:
            template = super().from_string(source, *args, **kwargs)
            template.source_text = str(source)
            return template

        def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
            raise _unsafe(f"{type(obj).__name__}.{attribute}")

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805 - jinja's
            try:
                return super().call(__context, __obj, *args, **kwargs)
            except SecurityError as err:
                raise _unsafe(str(err)) from None
            except OverflowError as err:  # the sandbox's range() past its limit
                raise _refused("an lm-eval prompt template asks for too much", str(err)[:200]) from None

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            size = _result_size(operator, left, right)
            if size > TEMPLATE_MAX_CHARS:
                raise _refused("an lm-eval prompt template computes a value too large to render",
                               f"{operator} of a {type(left).__name__} and a {type(right).__name__}: about {size} "
                               "characters", f"at most {TEMPLATE_MAX_CHARS} characters")
            return super().call_binop(context, operator, left, right)

    return Sandbox


def _unsafe(what: str) -> ConfigError:
    return _refused("an lm-eval prompt template reaches Python beyond the data (refused by Jinja's sandbox)", what[:200])


def _result_size(operator: str, left: Any, right: Any) -> int:
    """A bound on the size of ``left <operator> right`` (digits of a power, items of a repeated sequence)."""
    def integer(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if operator == "**" and integer(left) and integer(right) and abs(left) > 1 and right > 0:
        return right * abs(left).bit_length() // 3  # decimal digits, roughly
    if operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and integer(n):
                return len(seq) * max(n, 0)
    return 0
