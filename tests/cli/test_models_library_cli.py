"""`models add --reference`, `add FOLDER`, missing models, `models default` and `models set`, as a user runs them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from app.core.paths import data_paths
from app.core.settings import SettingsFile
from tests.cli.test_models_cli import TINY_ONNX, added, json_lines, models, models_folder
from tests.helpers.projector_header import write_projector, write_text_model
from tests.library.test_scan import write_gguf, write_split


def listed() -> dict[str, dict]:
    return {row["id"]: row for row in json_lines(models("list", "--json").stdout)}


def test_a_folder_is_looked_through_and_its_models_kept_where_they_are(tmp_path: Path) -> None:
    shelf = tmp_path / "mes modèles"
    write_gguf(shelf / "a" / "b" / "c" / "deep.gguf", name="Deep")
    write_split(shelf / "split", "big", 2)
    shutil.copytree(TINY_ONNX, shelf / "onnx" / "tiny")
    write_split(shelf / "half", "half", 3, leave_out=(3,))

    first = models("add", str(shelf))
    again = models("add", str(shelf))
    rows = listed()

    assert first.returncode == 0, first.stderr
    assert sorted(first.stdout.split()) == ["big", "deep", "tiny"]
    assert "skipped" in first.stderr and "part 3 of 3 (half-00003-of-00003.gguf) is missing" in first.stderr
    assert "added 3 models" in first.stderr and "stay where they are" in first.stderr
    assert again.returncode == 0 and again.stdout == "" and "already in the library" in again.stderr
    assert all(row["referenced"] and not row["missing"] for row in rows.values())
    assert rows["big"]["files"] == [str(shelf / "split" / f"big-0000{n}-of-00002.gguf") for n in (1, 2)]
    assert rows["deep"]["path"] == str(shelf / "a" / "b" / "c" / "deep.gguf")
    assert "(kept where it is)" in models("list").stdout
    assert not list(shelf.rglob("model.json")), "nothing is written into the user's folder"


def test_a_folder_with_no_model_says_so(tmp_path: Path) -> None:
    (tmp_path / "empty" / "deeper").mkdir(parents=True)
    result = models("add", str(tmp_path / "empty"))
    assert result.returncode == 3 and "No model was found in" in result.stderr and result.stdout == ""


def test_a_referenced_file_is_forgotten_on_remove_and_stays(tiny_model: Path, tmp_path: Path) -> None:
    (tmp_path / "my models ü").mkdir()
    mine = Path(shutil.copy(tiny_model, tmp_path / "my models ü" / "tiny model.gguf"))

    result = models("add", str(mine), "--reference")
    model_id = result.stdout.strip()
    rows = listed()
    removed = models("remove", model_id)

    assert result.returncode == 0 and "never moves or deletes it" in result.stderr
    assert rows[model_id]["referenced"] is True and rows[model_id]["path"] == str(mine)
    assert removed.returncode == 0
    assert removed.stdout.startswith(f'Forgot {model_id} ("kestrel-tiny"); the file stays at {mine}')
    assert mine.read_bytes() == tiny_model.read_bytes() and listed() == {}


def test_a_missing_model_is_marked_and_comes_back_with_its_settings(tiny_model: Path, tmp_path: Path) -> None:
    drive = tmp_path / "drive"
    drive.mkdir()
    mine = Path(shutil.copy(tiny_model, drive / "tiny.gguf"))
    model_id = models("add", str(mine), "--reference").stdout.strip()
    assert models("set", model_id, "temperature=0.3").returncode == 0
    drive.rename(tmp_path / "unplugged")

    plain = models("list").stdout
    info = json_lines(models("info", model_id, "--json").stdout)
    refused = models("default", model_id)
    (tmp_path / "unplugged").rename(drive)
    back = listed()[model_id]

    assert f"(missing: not at {mine} now)" in plain
    assert info[0]["missing"] is True and info[0]["defaults"] == {"temperature": 0.3}
    assert refused.returncode == 3 and "its file is not at" in refused.stderr
    assert back["missing"] is False
    assert json_lines(models("info", model_id, "--json").stdout)[0]["defaults"] == {"temperature": 0.3}


def test_the_default_model_is_chosen_and_shown(tiny_model: Path) -> None:
    tiny, onnx = added(tiny_model), added(TINY_ONNX)

    before = models("default")
    chosen = models("default", onnx)
    after = models("default")

    assert before.stdout.startswith(f"{tiny} (the oldest installed")
    assert chosen.returncode == 0 and "is now the model used when none is named" in chosen.stdout
    assert after.stdout.strip() == f"{onnx} (chosen)"
    assert SettingsFile(data_paths().settings_file).load().default_model == onnx
    assert listed()[onnx]["default"] is True
    assert models("default", "nope").returncode == 3


def test_a_models_own_settings_are_set_checked_shown_and_cleared(tiny_model: Path, tmp_path: Path) -> None:
    model_id = added(tiny_model)
    template = tmp_path / "template.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}", encoding="utf-8")

    set_ = models("set", model_id, "context_length=8192", "gpu_layers=auto", "device_preference=cpu",
                  "system_prompt=Réponds brièvement.", f"chat_template=@{template}")
    plain = models("info", model_id).stdout
    bad_value = models("set", model_id, "temperature=hot")
    bad_key = models("set", model_id, "colour=blue")
    not_pair = models("set", model_id, "temperature")
    out_of_range = models("set", model_id, "context_length=10")
    cleared = models("set", model_id, "top_k=20", "--clear", "context_length")
    record = json.loads((models_folder() / model_id / "model.json").read_text(encoding="utf-8"))

    assert set_.returncode == 0, set_.stderr
    assert "context_length=8192" in set_.stdout and "device_preference='cpu'" in set_.stdout
    assert "own settings:    context_length=8192" in plain
    assert bad_value.returncode == 2
    assert 'temperature must be a number from 0 to 5 (you gave "hot").' in bad_value.stderr
    assert bad_key.returncode == 2 and '"colour" is not a model setting' in bad_key.stderr
    assert not_pair.returncode == 2 and "KEY=VALUE" in not_pair.stderr
    assert out_of_range.returncode == 2 and "context_length must be" in out_of_range.stderr
    assert "Nothing was changed" in out_of_range.stderr
    assert cleared.returncode == 0
    assert record["defaults"] == {"device_preference": "cpu", "system_prompt": "Réponds brièvement.",
                                  "top_k": 20, "chat_template": template.read_text(encoding="utf-8")}
    assert models("set", "nope", "top_k=1").returncode == 3


def test_a_models_vision_projector_is_paired_and_unpaired_by_hand(tmp_path: Path) -> None:
    model = write_text_model(tmp_path / "kept" / "tiny.gguf", embedding_length=64)
    added_ = models("add", str(model), "--reference")
    model_id = added_.stdout.strip()
    projector = write_projector(tmp_path / "other" / "vision-tiny.gguf", projection_dim=64)
    wrong = write_projector(tmp_path / "other" / "vision-big.gguf", projection_dim=4096)
    record = models_folder() / model_id / "model.json"
    assert added_.returncode == 0 and "vision-tiny" not in models("info", model_id).stdout, "added alone: text only"

    paired = models("set", model_id, "--projector", str(projector))
    shown = models("info", model_id).stdout
    refused = models("set", model_id, "temperature=0.3", "--projector", str(wrong))
    missing = models("set", model_id, "--projector", str(tmp_path / "gone.gguf"))
    kept = json.loads(record.read_text(encoding="utf-8"))
    unpaired = models("set", model_id, "--projector", "none")
    nothing = models("set", model_id)

    assert paired.returncode == 0, paired.stderr
    assert paired.stdout == f"{model_id} reads images with the vision projector {projector}.\n"
    assert str(projector) in shown
    assert refused.returncode == 2 and "vision-big.gguf is made for a model 4,096 numbers wide" in refused.stderr
    assert "Nothing was changed." in refused.stderr
    assert missing.returncode == 2
    assert "--projector must be a vision projector file (an mmproj .gguf) or none" in missing.stderr
    assert kept["projector"] == str(projector) and not kept.get("defaults"), "a refusal changed nothing"
    assert unpaired.returncode == 0, unpaired.stderr
    assert unpaired.stdout == f"{model_id} has no vision projector now: it reads text only.\n"
    assert "projector" not in json.loads(record.read_text(encoding="utf-8"))
    assert nothing.returncode == 2 and "--projector PATH" in nothing.stderr


def test_a_file_dropped_into_the_models_folder_is_listed_and_forgotten_on_remove(tmp_path: Path) -> None:
    dropped = write_gguf(models_folder() / "by hand.gguf", name="By hand")

    rows = listed()
    [model_id] = rows
    removed = models("remove", model_id)

    assert rows[model_id]["referenced"] is True and rows[model_id]["path"] == str(dropped)
    assert removed.returncode == 0 and "the file stays at" in removed.stdout
    assert dropped.is_file() and listed() == {}, "forgotten, and not found again"
