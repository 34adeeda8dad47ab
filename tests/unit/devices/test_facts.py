from pytest_sme2.devices.facts import cpu_features, cpu_name

ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 48.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp sme sme2 sme2p1
CPU implementer\t: 0x41
CPU part\t: 0xd85
Hardware\t: MT6993
"""

X86_CPUINFO = """processor\t: 0
model name\t: AMD EPYC 9B14
flags\t\t: fpu vme de pse avx2 avx512f
"""


def test_arm_features_and_name():
    feats = cpu_features(ARM_CPUINFO)
    assert {"sme", "sme2", "asimd"} <= feats
    assert cpu_name(ARM_CPUINFO) == "MT6993"


def test_x86_flags_and_name():
    assert "avx512f" in cpu_features(X86_CPUINFO)
    assert "sme2" not in cpu_features(X86_CPUINFO)
    assert cpu_name(X86_CPUINFO) == "AMD EPYC 9B14"
