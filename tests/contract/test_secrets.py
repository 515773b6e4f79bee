"""URL secrets redacted before anything is written, keyed or logged; keys pasted where a name belongs."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from runner.backends.openai.config import OpenAIBackendConfig
from runner.cache.generations import settings_context
from runner.contract.backend import ChatFormat, TaskLimits
from runner.contract.secrets import has_secret, looks_like_key, redact_text, redact_tree, redact_url
from runner.job.flow import redact_hydra_files

PASSWORD = "hunter2-Pa55word"


@dataclass
class Quant:
    name: str = "none"


@pytest.mark.parametrize(("url", "shown"), [
    (f"http://alice:{PASSWORD}@10.0.0.5:8000/v1", "http://REDACTED@10.0.0.5:8000/v1"),
    (f"https://{PASSWORD}@host/v1", "https://REDACTED@host/v1"),
    (f"https://host/v1?api_key={PASSWORD}&region=eu", "https://host/v1?api_key=REDACTED&region=eu"),
    (f"postgresql://mlflow:{PASSWORD}@db:5432/mlflow?sslmode=require&token={PASSWORD}",
     "postgresql://REDACTED@db:5432/mlflow?sslmode=require&token=REDACTED"),
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),  # nothing secret: unchanged
    ("sqlite:////tmp/mlflow.db", "sqlite:////tmp/mlflow.db"),
    ("/data/model", "/data/model"),
])
def test_user_info_and_secret_query_parameters_are_redacted(url, shown):
    assert redact_url(url) == shown
    assert has_secret(url) == (url != shown)


def test_text_and_config_trees_are_redacted_wherever_a_url_appears():
    line = f"backend=openai backend.base_url=http://u:{PASSWORD}@h:1/v1 task=mmlu"
    assert redact_text(line) == "backend=openai backend.base_url=http://REDACTED@h:1/v1 task=mmlu"
    tree = {"backend": {"base_url": f"http://u:{PASSWORD}@h/v1", "extra": [f"https://h/x?token={PASSWORD}", "plain"]}, "n": 3}
    assert PASSWORD not in str(redact_tree(tree)) and redact_tree(tree)["n"] == 3


def test_the_cache_key_holds_the_redacted_url():
    config = OpenAIBackendConfig(base_url=f"http://u:{PASSWORD}@h:8000/v1")
    context = settings_context(Quant(), config, (), TaskLimits(8, 8), ChatFormat())
    assert context["backend"]["base_url"] == "http://REDACTED@h:8000/v1" and PASSWORD not in str(context)


def test_hydras_saved_files_are_rewritten_redacted(tmp_path):
    hydra = tmp_path / ".hydra"
    hydra.mkdir()
    (hydra / "overrides.yaml").write_text(f"- backend.base_url=http://u:{PASSWORD}@h/v1\n- task=mmlu\n")
    (hydra / "hydra.yaml").write_text("plain: true\n")
    redact_hydra_files(tmp_path)
    assert (hydra / "overrides.yaml").read_text() == "- backend.base_url=http://REDACTED@h/v1\n- task=mmlu\n"
    assert (hydra / "hydra.yaml").read_text() == "plain: true\n"


@pytest.mark.parametrize(("value", "key"), [
    ("OPENAI_API_KEY", False), ("RUNNER_TEST_API_KEY", False), ("my_key", False),
    ("sk-proj-abc", True), ("hf_AbCdEf", True), ("nvapi-xyz", True), ("abc def", True), ("key=value", True),
    ("Qm9zZXR0aW5nczEyMzQ1Njc4OTBhYmNkZWZn", True),  # 36 characters of mixed case and digits
])
def test_a_key_is_told_from_a_variable_name(value, key):
    assert looks_like_key(value) is key


@pytest.mark.parametrize(("hf_id", "ok"), [
    ("HuggingFaceTB/SmolLM2-135M-Instruct", True), ("gpt2", True), ("org/unregistered", True),
    ("<img src=x onerror=alert(1)>", False), ("org/../etc", False), ("a/b/c", False), ("org/na me", False),
])
def test_hf_id_is_held_to_a_hub_ids_shape(hf_id, ok):
    from runner.contract.errors import ConfigError
    from runner.files.paths import check_hub_id

    if ok:
        assert check_hub_id(hf_id, "model.hf_id") == hf_id
    else:
        with pytest.raises(ConfigError, match="Hugging Face repo id"):
            check_hub_id(hf_id, "model.hf_id")


@pytest.mark.parametrize(("text", "shown"), [  # Hydra's override_dirname: the items joined by commas
    (f"backend.base_url=http://a:{PASSWORD}@h/v1,backend.base_url=http://b:{PASSWORD}@h2/v1",
     "backend.base_url=http://REDACTED@h/v1,backend.base_url=http://REDACTED@h2/v1"),
    (f"backend.base_url=http://h:1,tracking.tracking_uri=postgresql://m:{PASSWORD}@db/x,task=mmlu",
     "backend.base_url=http://h:1,tracking.tracking_uri=postgresql://REDACTED@db/x,task=mmlu"),
    (f"backend.base_url=http://a:{PASSWORD}@h:8000,tracking.tracking_uri=http://m:{PASSWORD}@t:5000",
     "backend.base_url=http://REDACTED@h:8000,tracking.tracking_uri=http://REDACTED@t:5000"),
    (f"x=http://h/?next=http://u:{PASSWORD}@h2/ y", "x=http://h/?next=http://REDACTED@h2/ y"),
    (f"x=http://u:{PASSWORD},k=v@h/v1 y", "x=http://REDACTED@h/v1 y"),  # a comma inside the password
    (f"x: 'http://u:it''s-{PASSWORD}@h/v1'", "x: 'http://REDACTED@h/v1'"),  # a quote inside the password
    # a sweep's values, escaped by Hydra
    (rf"a=https\://bob\:{PASSWORD}@h2/v1,b=postgresql\://c\:{PASSWORD}@db\:5432/x,c=http\://h\:1",
     r"a=https\://REDACTED@h2/v1,b=postgresql\://REDACTED@db\:5432/x,c=http\://h\:1"),
])
def test_every_url_of_an_override_list_is_redacted_item_by_item(text, shown):
    assert redact_text(text) == shown


def test_saved_yaml_is_redacted_in_its_text_and_in_each_value(tmp_path):
    from runner.files.redaction import redact_saved_configs

    hydra = tmp_path / ".hydra"
    hydra.mkdir()
    (hydra / "hydra.yaml").write_text(
        "hydra:\n  job:\n    override_dirname: backend.base_url=http://a:{0}@h/v1,backend.base_url=http://b:{0}@h2/v1\n"
        "  overrides:\n    task:\n    - backend.base_url='http://a:pa''{0}@h/v1'\n".format(PASSWORD))
    redact_saved_configs(hydra)
    text = (hydra / "hydra.yaml").read_text()
    assert PASSWORD not in text and text.count("REDACTED") == 3


def test_log_records_are_redacted_whatever_handler_writes_them(caplog):
    import logging

    from runner.contract.secrets import redact_logs

    redact_logs()
    with caplog.at_level(logging.INFO):
        logging.getLogger("hydra.anything").info("#0 : a=%s,b=%s", f"http://u:{PASSWORD}@h", f"https://v:{PASSWORD}@g")
    assert PASSWORD not in caplog.text and caplog.text.count("REDACTED") == 2


@pytest.mark.parametrize(("text", "secret"), [
    ("backend.launch.env.HF_TOKEN=tok-Value-1234 task=mmlu", "tok-Value-1234"),
    ("+backend.extra_body.api_key=body-Value-1234,task=mmlu", "body-Value-1234"),
    ("backend.api_key_env=sk-abcdefghijklmnopqrstuvwxyz123456", "sk-abcdefghijklmnopqrstuvwxyz123456"),
    ("https://h/v1?pw=q-Value-1234&x=1", "q-Value-1234"),
    ("https://h/v1?pass=q-Value-1234&jwt=j-Value-1234", "Value-1234"),
    ("https://h/v1?code=oauth-Code-1234", "oauth-Code-1234"),
    ("https://h/v1#token=frag-Value-1234&x=1", "frag-Value-1234"),
    ("Authorization: Bearer bearer-Value-1234", "bearer-Value-1234"),
    ('{"authorization": "Basic YWxpY2U6cGFzc3dvcmQ="}', "YWxpY2U6cGFzc3dvcmQ="),
    ("HF_TOKEN: yaml-Value-1234\nother: 1", "yaml-Value-1234"),
    ("the key hf_abcdefghijklmnopqrstuvwxyz12 leaked", "hf_abcdefghijklmnopqrstuvwxyz12"),
])
def test_every_kind_of_secret_value_is_redacted_in_text(text, secret):
    assert secret not in redact_text(text) and "REDACTED" in redact_text(text)


def test_names_that_only_resemble_secrets_are_kept():
    text = "task.cluster_key=subject max_tokens: 5 backend.api_key_env=OPENAI_API_KEY model.trust_remote_code=true"
    assert redact_text(text) == text
    tree = {"task": {"cluster_key": "subject"}, "backend": {"api_key_env": "OPENAI_API_KEY", "max_tokens": 5}}
    assert redact_tree(tree) == tree


def test_config_trees_hide_values_under_secret_names():
    tree = {"backend": {"launch": {"env": {"HF_TOKEN": "tok-Value-1234", "CUDA_VISIBLE_DEVICES": "0"}},
                        "extra_body": {"api_key": "body-Value-1234", "temperature": 0.5}}}
    shown = redact_tree(tree)
    assert shown["backend"]["launch"]["env"] == {"HF_TOKEN": "REDACTED", "CUDA_VISIBLE_DEVICES": "0"}
    assert shown["backend"]["extra_body"] == {"api_key": "REDACTED", "temperature": 0.5}


def test_a_secret_the_runner_holds_is_hidden_wherever_it_comes_back():
    """A server echoing the request's headers prints the key and the Basic-auth form of a URL's password."""
    import base64

    from runner.contract.secrets import remember

    remember("Held-key-98765")
    redact_url("http://alice:Url-pass-4321@h/v1")
    basic = base64.b64encode(b"alice:Url-pass-4321").decode()
    echoed = f'{{"x-api": "Held-key-98765", "authorization2": "{basic}", "raw": "Url-pass-4321"}}'
    assert not any(s in redact_text(echoed) for s in ("Held-key-98765", basic, "Url-pass-4321"))


def test_a_directory_named_from_overrides_holding_a_secret_is_refused():
    from runner.config.guard import check_overrides
    from runner.contract.errors import ConfigError

    secret = "backend.base_url=http://u:Dir-pass-1234@h/v1"
    with pytest.raises(ConfigError, match="directory named from the overrides") as err:
        check_overrides(["-m", "hydra.sweep.subdir=${hydra.job.override_dirname}", secret])
    assert "Dir-pass-1234" not in str(err.value)
    check_overrides(["-m", "hydra.sweep.subdir=${hydra.job.override_dirname}", secret,
                     "hydra.job.config.override_dirname.exclude_keys=[backend.base_url]"])
