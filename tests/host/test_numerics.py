"""Numerics profiles (soaklab.host.numerics): what a profile exports, which hosts can run it, the
machine kind it gives, and every malformed profile as one line naming the setting."""

from __future__ import annotations

import pytest

from soaklab.host.numerics import ProfileError, apply, machine_kind, missing_on_host, parse_profile

AVX2 = {"cpu_capability": "avx2", "threads": 2, "task_terms": "inductor"}


def test_a_profile_exports_torch_mkl_onednn_and_the_compile_mode():
    profile = parse_profile("numerics", AVX2)
    assert profile.env() == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                             "SOAKLAB_TORCH_COMPILE": "1"}
    assert parse_profile("x", profile.to_json()) == profile  # the soak flag's JSON round-trips
    assert parse_profile("x", {**AVX2, "task_terms": "eager"}).env()["SOAKLAB_TORCH_COMPILE"] == "0"


@pytest.mark.parametrize(("value", "words"), [
    ({**AVX2, "cpu_capability": "neon"}, "numerics.cpu_capability: 'neon' is not an x86-64 capability"),
    ({**AVX2, "threads": 0}, "numerics.threads: 0: expected an integer in [1, 256]"),
    ({**AVX2, "threads": True}, "numerics.threads: True"),
    ({**AVX2, "threads": 257}, "numerics.threads: 257"),
    ({**AVX2, "task_terms": "jit"}, "numerics.task_terms: 'jit'"),
    ({**AVX2, "mkl": "AVX2"}, "numerics.mkl: not a profile setting"),
    ({"threads": 2, "task_terms": "eager"}, "numerics.cpu_capability: required"),
    ("[1, 2]", "numerics: expected a mapping"),
    ("{not json", "numerics: '{not json' is not a JSON object"),
    ("[" * 100_000 + "]" * 100_000, "is not a JSON object (maximum recursion depth exceeded"),
    ('{"threads": 2, "threads": 4}', "(key 'threads' appears twice in one object)"),
])
def test_a_malformed_profile_is_one_line_naming_the_setting(value, words):
    with pytest.raises(ProfileError) as found:
        parse_profile("numerics", value)
    assert words in str(found.value) and "\n" not in str(found.value)


def test_which_hosts_can_run_a_profile():
    profile = parse_profile("numerics", AVX2)
    assert missing_on_host(profile, "x86_64", {"sse4_2", "avx", "avx2", "fma", "avx512f"}) is None
    assert missing_on_host(profile, "x86_64", {"sse4_2", "avx"}) == "this CPU has no avx2, fma; the profile runs AVX2"
    assert missing_on_host(profile, "aarch64", {"asimd"}) == "this host is aarch64; the profile is for x86_64"
    assert missing_on_host(parse_profile("n", {**AVX2, "cpu_capability": "default"}), "x86_64", set()) is None


def test_the_machine_kind_is_the_arithmetic_not_the_vm():
    numerics = {**AVX2, "env": {}, "host_lacks": None}
    epyc = {"cpu_model": "AMD EPYC", "cores": 2, "cpu_capability": "AVX2", "machine": "x86_64",
            "vendor": "AuthenticAMD"}
    zen4 = {**epyc, "cpu_model": "AMD EPYC 9R14", "cores": 96}
    xeon = {"cpu_model": "Intel(R) Xeon(R) Platinum", "cores": 16, "cpu_capability": "AVX2", "machine": "x86_64",
            "vendor": "GenuineIntel"}
    # the model and the cores are not in it; the vendor is (MKL rounds differently on Intel and AMD)
    assert machine_kind(numerics, epyc) == machine_kind(numerics, zen4) == \
        "cpu: x86_64 AVX2 AMD, 2 threads, inductor task terms"
    assert machine_kind(numerics, xeon) == "cpu: x86_64 AVX2 Intel, 2 threads, inductor task terms"
    # a host that could not run the capability ran less, and its kind says what it ran
    assert machine_kind(numerics, {**epyc, "cpu_capability": "DEFAULT"}).startswith("cpu: x86_64 DEFAULT AMD,")


def test_apply_exports_into_this_process(monkeypatch):
    import os

    for key in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "SOAKLAB_TORCH_COMPILE"):
        monkeypatch.setenv(key, "")  # restored (or removed) after the test: apply() writes these

    applied = apply(parse_profile("numerics", AVX2))
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2" and os.environ["MKL_CBWR"] == "AVX2"
    assert applied["threads"] == 2 and applied["env"]["ONEDNN_MAX_CPU_ISA"] == "AVX2" and "host_lacks" in applied
