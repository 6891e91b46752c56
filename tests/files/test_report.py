"""The HTML tables: pass/fail per row, hashes shortened with the full value on hover, values kept
distinguishable (null, [], strings)."""

from __future__ import annotations

from soaklab.files.report import table_html

DIGEST = "ab" * 32


def test_rows_are_coloured_by_passed_and_the_verdict_says_so():
    page = table_html([{"name": "a", "expected": 0, "actual": 0, "passed": True},
                       {"name": "b", "expected": [], "actual": [3], "passed": False}], "t", "failed: 1 of 2")
    assert page.count('<tr class="pass">') == 1 and page.count('<tr class="fail">') == 1
    assert 'class="verdict failed-any"' in page and "failed: 1 of 2" in page
    assert "<td>[]</td>" in page and "<td>[3]</td>" in page


def test_a_hash_is_shortened_with_the_full_value_on_hover():
    page = table_html([{"expected": f"sha256:{DIGEST}", "actual": DIGEST}], "t")
    assert f'<abbr title="sha256:{DIGEST}">sha256:abababab…abab</abbr>' in page
    assert f'<abbr title="{DIGEST}">abababab…abab</abbr>' in page


def test_values_stay_distinguishable_and_escaped():
    page = table_html([{"v": None}, {"v": []}, {"v": ""}, {"v": True}, {"v": "<b>"}], "t")
    assert "<td>null</td>" in page and "<td>[]</td>" in page and "<td></td>" in page
    assert "<td>true</td>" in page and "&lt;b&gt;" in page and "<b>" not in page.split("<body>")[1]
