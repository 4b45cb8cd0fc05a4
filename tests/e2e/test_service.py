"""`aai-gateway service`: the per-user units it writes, checked as documents by the tools that
read them — systemd-analyze for the systemd user unit, plistlib for the launchd LaunchAgent,
an XML parser for the Task Scheduler task — and install/status/uninstall on this machine."""

import os
import plistlib
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import GATEWAY, gateway_env


def run(env, *args):
    return subprocess.run([str(GATEWAY), *args], env=env, capture_output=True, text=True, timeout=60)


def printed(env, manager):
    out = run(env, "service", "install", "--print", "--manager", manager)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_systemd_user_unit_verifies(home, tmp_path):
    assert shutil.which("systemd-analyze"), "systemd-analyze is missing: apt-get install -y systemd"
    unit = tmp_path / "aai-gateway.service"
    unit.write_text(printed(gateway_env(home, None), "systemd"))
    text = unit.read_text()
    assert f'ExecStart="{GATEWAY}" serve' in text
    assert f'Environment="AAI_HOME={home}"' in text
    assert "Restart=on-failure" in text and "RestartSec=5s" in text and "RestartMaxDelaySec=60s" in text
    assert "WantedBy=default.target" in text
    verify = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stderr
    # Older systemd (Debian 12 has 252) does not know the backoff keys yet; nothing else is wrong.
    problems = [line for line in verify.stderr.splitlines()
                if line.strip() and "RestartSteps" not in line and "RestartMaxDelaySec" not in line]
    assert problems == [], problems
    # A unit pointing at a program that is not there is caught by the same check.
    broken = tmp_path / "broken.service"
    broken.write_text(text.replace(str(GATEWAY), "/nonexistent/aai-gateway"))
    bad = subprocess.run(["systemd-analyze", "verify", str(broken)], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 or "nonexistent" in bad.stderr


def test_launchd_agent_is_a_valid_plist(home):
    plist = plistlib.loads(printed(gateway_env(home, None), "launchd").encode())
    assert plist["Label"] == "org.aai.gateway"
    assert plist["ProgramArguments"] == [str(GATEWAY), "serve"]
    assert plist["EnvironmentVariables"] == {"AAI_HOME": str(home)}
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["RunAtLoad"] is True and plist["ThrottleInterval"] >= 5


def test_task_scheduler_task_is_valid_xml(home):
    root = ET.fromstring(printed(gateway_env(home, None), "task-scheduler").encode())
    ns = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
    assert root.tag == "{http://schemas.microsoft.com/windows/2004/02/mit/task}Task"
    assert root.find("t:Actions/t:Exec/t:Command", ns).text == str(GATEWAY)
    assert root.find("t:Actions/t:Exec/t:Arguments", ns).text == "serve"
    assert root.find("t:Principals/t:Principal/t:RunLevel", ns).text == "LeastPrivilege"
    assert root.find("t:Settings/t:RestartOnFailure/t:Interval", ns).text == "PT1M"
    assert root.find("t:Triggers/t:LogonTrigger/t:Enabled", ns).text == "true"


def test_hostile_paths_stay_data_in_every_format(tmp_path):
    home = tmp_path / 'we"ird $HOME <&> 100%'
    home.mkdir()
    env = gateway_env(home, None)
    systemd = printed(env, "systemd")
    assert 'Environment="AAI_HOME=' in systemd and "$$HOME" in systemd and "100%%" in systemd and '\\"' in systemd
    assert plistlib.loads(printed(env, "launchd").encode())["EnvironmentVariables"]["AAI_HOME"] == str(home)
    ET.fromstring(printed(env, "task-scheduler").encode())


def test_install_status_uninstall_for_this_user(home, tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    env = {k: v for k, v in gateway_env(home, None).items() if k not in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")}
    env["HOME"] = str(user)
    unit = user / ".config" / "systemd" / "user" / "aai-gateway.service"
    before = run(env, "service", "status")
    assert before.returncode == 1 and "not installed" in before.stdout
    installed = run(env, "service", "install")
    # Without a user service manager here, the unit is still written and the message says so.
    assert installed.returncode in (0, 1), installed.stderr
    if installed.returncode == 1:
        assert str(unit) in installed.stderr and "aai-gateway serve" in installed.stderr
    assert unit.read_text() == printed(env, "systemd")
    status = run(env, "service", "status")
    assert status.returncode == 0 and "installed" in status.stdout and "not running" in status.stdout
    removed = run(env, "service", "uninstall")
    assert removed.returncode == 0 and "removed" in removed.stdout
    assert not unit.exists()
