"""The XDG autostart file (Linux): written whole, read back by GLib's own desktop-entry parser (`gio launch`
runs it, so a path with spaces, "ü", quotes and "%" must reach the program as it was), removed, and a
refusal said in words that name the file."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.core import autostart
from app.core.autostart import AutostartError, XdgAutostartFile
from app.core.autostart.xdg_autostart import exec_argument, exec_line, xdg_autostart_path

needs_gio = pytest.mark.skipif(shutil.which("gio") is None,
                               reason="gio (GLib's launcher, apt package libglib2.0-bin) is not installed")


def test_the_file_goes_in_xdg_config_home_or_dot_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert xdg_autostart_path({}, home) == home / ".config" / "autostart" / "kestrel.desktop"
    assert xdg_autostart_path({"XDG_CONFIG_HOME": "/elsewhere/cfg"}, home) == Path(
        "/elsewhere/cfg/autostart/kestrel.desktop")
    # The spec ignores a relative XDG_CONFIG_HOME.
    assert xdg_autostart_path({"XDG_CONFIG_HOME": "cfg"}, home) == home / ".config" / "autostart" / "kestrel.desktop"


def test_write_read_back_and_remove(tmp_path: Path) -> None:
    entry = XdgAutostartFile(tmp_path / "autostart" / "kestrel.desktop")
    assert entry.enabled() is False
    entry.enable(["/opt/Kestrel/kestrel", "--background"])
    text = entry.path.read_text(encoding="utf-8")
    assert text.startswith("[Desktop Entry]\n")
    assert "Exec=/opt/Kestrel/kestrel --background\n" in text
    assert "X-GNOME-Autostart-enabled=true\n" in text and "Type=Application\n" in text
    assert entry.enabled() is True
    assert [p.name for p in entry.path.parent.iterdir()] == ["kestrel.desktop"]  # no temporary left
    entry.disable()
    assert not entry.path.exists() and entry.enabled() is False
    entry.disable()  # nothing there: nothing to do


@pytest.mark.parametrize("line", ["Hidden=true", "X-GNOME-Autostart-enabled=false"])
def test_an_entry_the_desktop_turned_off_is_not_enabled(tmp_path: Path, line: str) -> None:
    entry = XdgAutostartFile(tmp_path / "kestrel.desktop")
    entry.enable(["/usr/bin/kestrel"])
    entry.path.write_text(entry.path.read_text(encoding="utf-8").replace("X-GNOME-Autostart-enabled=true", line),
                          encoding="utf-8")
    assert entry.enabled() is False


def test_arguments_are_quoted_as_the_desktop_entry_spec_says() -> None:
    assert exec_argument("/usr/bin/kestrel") == "/usr/bin/kestrel"
    assert exec_argument("/home/jü/My Apps/kestrel") == '"/home/jü/My Apps/kestrel"'
    assert exec_argument('a"b$c`d\\e') == '"a\\"b\\$c\\`d\\\\e"'
    assert exec_argument("50%") == "50%%"
    assert exec_argument("") == '""'
    # The string escapes come after the quoting: one backslash in a path is four in the file.
    assert exec_line(["/a\\b"]) == '"/a\\\\\\\\b"'
    with pytest.raises(ValueError, match="line break"):
        exec_line(["/bin/kestrel", "a\nb"])


@needs_gio
def test_glib_runs_the_entry_with_the_arguments_as_written(tmp_path: Path) -> None:
    # No "%" in the program's own path: GLib looks the program up before it undoes "%%" (its limit, not
    # the spec's), so that case is held by the quoting test above; an argument's "%" is checked here.
    folder = tmp_path / "Mein Ordner ü (x)" / "it's $HOME; `a`"
    folder.mkdir(parents=True)
    program = folder / "kestrel bin"
    record = tmp_path / "argv.txt"
    program.write_text(f"#!{sys.executable}\nimport sys, pathlib\n"
                       f"pathlib.Path({str(record)!r}).write_text('\\n'.join(sys.argv), encoding='utf-8')\n",
                       encoding="utf-8")
    program.chmod(0o755)
    entry = XdgAutostartFile(tmp_path / "config" / "autostart" / "kestrel.desktop")
    command = [str(program), "--background", 'say "hi" \\ there', "tab\there", "100%"]
    entry.enable(command)

    environment = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    subprocess.run(["gio", "launch", str(entry.path)], check=True, env=environment, timeout=30)
    deadline = time.monotonic() + 20
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert record.read_text(encoding="utf-8").split("\n") == command


def test_a_folder_that_cannot_be_written_is_said_with_the_file_and_what_to_do(tmp_path: Path) -> None:
    # A file where the autostart folder should be: refused even for root, who passes permission checks.
    (tmp_path / "autostart").write_text("not a folder", encoding="utf-8")
    entry = XdgAutostartFile(tmp_path / "autostart" / "kestrel.desktop")
    with pytest.raises(AutostartError) as caught:
        entry.enable(["/usr/bin/kestrel", "--background"])
    words = str(caught.value)
    assert str(entry.path) in words and "will not start when you sign in" in words
    assert "Check that you can write to the folder" in words and "Traceback" not in words


def test_a_file_that_cannot_be_removed_is_said_with_the_file_and_what_to_do(tmp_path: Path) -> None:
    entry = XdgAutostartFile(tmp_path / "kestrel.desktop")
    entry.path.mkdir()  # a folder in its place: unlink refuses
    with pytest.raises(AutostartError) as caught:
        entry.disable()
    assert str(entry.path) in str(caught.value) and "will still start when you sign in" in str(caught.value)


def test_enable_and_disable_on_linux_use_the_users_config_folder(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    autostart.enable()
    written = (tmp_path / "cfg" / "autostart" / "kestrel.desktop").read_text(encoding="utf-8")
    assert f"Exec={exec_line([sys.executable, '-m', 'app', '--background'])}\n" in written
    assert autostart.enabled() is True
    autostart.disable()
    assert autostart.enabled() is False


def test_renewing_at_start_keeps_an_entry_the_desktop_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    entry = tmp_path / "cfg" / "autostart" / "kestrel.desktop"
    autostart.renew(["/opt/Kestrel 2/kestrel", "--background"])
    assert not entry.exists(), "no entry: renewing makes none"
    autostart.enable(["/opt/Kestrel/kestrel", "--background"])
    autostart.renew(["/opt/Kestrel 2/kestrel", "--background"])
    assert '"/opt/Kestrel 2/kestrel"' in entry.read_text(encoding="utf-8"), "on: it follows the install"
    entry.write_text(entry.read_text(encoding="utf-8").replace("X-GNOME-Autostart-enabled=true",
                                                               "X-GNOME-Autostart-enabled=false"), encoding="utf-8")
    autostart.renew(["/opt/Kestrel 3/kestrel", "--background"])
    assert "X-GNOME-Autostart-enabled=false" in entry.read_text(encoding="utf-8"), "turned off by the desktop: kept"
