"""System probe: pure parsers on real captured files, and the collector on an injected root."""

from __future__ import annotations

from relaxrepro.collect.context import Context
from relaxrepro.collect.probes import system
from tests.helpers.common import FIXTURES

ROOT = FIXTURES / "system" / "debian12-epyc"


def test_parse_os_release_debian12():
    info = system.parse_os_release((ROOT / "etc/os-release").read_text())
    assert info["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)" and info["VERSION_ID"] == "12"


def test_parse_os_release_quoting_and_comments():
    text = "# comment\nNAME='Ubuntu'\nVERSION=\"22.04.4 LTS (Jammy \\\"Jellyfish\\\")\"\nID=ubuntu\n\nbroken line\n"
    assert system.parse_os_release(text) == {"NAME": "Ubuntu", "VERSION": '22.04.4 LTS (Jammy "Jellyfish")',
                                             "ID": "ubuntu"}


def test_parse_cpuinfo_epyc():
    cpu = system.parse_cpuinfo((ROOT / "proc/cpuinfo").read_text())
    assert cpu == {"model": "AMD EPYC", "logical_cpus": 2, "sockets": 1, "cores": 2}


def test_parse_meminfo():
    assert system.parse_meminfo((ROOT / "proc/meminfo").read_text()) == 23.54
    assert system.parse_meminfo("garbage\nMemTotal: lots kB\n") is None


def test_collect_from_injected_root():
    out = system.collect(Context(env={}, root=str(ROOT)))
    assert out.status == "ok"
    assert out.data["environment"]["system"]["distribution"] == "Debian GNU/Linux 12 (bookworm)"
    assert out.data["hardware"]["memory_total_gb"] == 23.54


def test_unreadable_proc_is_partial_not_fatal(tmp_path):
    out = system.collect(Context(env={}, root=str(tmp_path)))
    assert "distribution" not in out.data["environment"]["system"]
    assert out.status == "partial"
    assert out.warnings == ["/proc/cpuinfo unreadable: CPU model, cores and sockets not recorded",
                            "/proc/meminfo unreadable: memory total not recorded"]
