"""The science table's fingerprint reads the claims ledger without its quotes (provenance.ledger_code).

A science run reads benchmarks/claims.py for what to check (each claim's notebook and backings), never
for the words quoted, and tests/test_claims.py checks each quote against its notebook in make test: a
quote that follows a reworded sentence names no figure stale. Everything else of the ledger (a backing,
a notebook, a claim added or removed, any other line of code) still does: the controls below.
"""

import pytest

from benchmarks import claims, provenance

QUOTE = "so it is right about 3 times in 4 and sometimes answers with an empty response"
FIRST = f'    C("lab11", "{QUOTE}",\n      T + "test_sft_is_right_about_three_times_in_four"),\n'   # the first claim
SOURCE = (provenance.REPO / provenance.LEDGER).read_text()


def edited(old, new, source=SOURCE):
    assert source.count(old) == 1, old
    return source.replace(old, new)


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    """A small repository whose figure "x.json" measured a copy of the claims ledger; returns a function
    that writes the ledger's new text and names the files changed since the figure was made."""
    path = tmp_path / provenance.LEDGER
    path.parent.mkdir()
    path.write_text(SOURCE)
    monkeypatch.setitem(provenance.MEASURED, "x.json", [provenance.LEDGER])
    data = {"fingerprint": provenance.fingerprint("x.json", tmp_path), "inputs": provenance.inputs("x.json", tmp_path)}

    def changed_after(text):
        path.write_text(text)
        return provenance.changed_since("x.json", data, tmp_path)
    return changed_after


def test_the_ledger_is_read_without_every_quote_of_claims_and_nothing_else():
    code = provenance.ledger_code(SOURCE)
    assert code.count(repr(provenance.QUOTE)) == len(claims.CLAIMS)
    assert not [c.quote for c in claims.CLAIMS if repr(c.quote) in code]
    assert repr("test_sft_is_right_about_three_times_in_four") in code and repr("lab12.hack.kl_plateau") in code


def test_a_reworded_quote_names_no_figure_stale(ledger):
    assert ledger(edited(QUOTE, "so it is right about 4 times in 5")) == []
    assert ledger(edited(QUOTE, "so it is right about 3 times " '"\n      "in 4 and sometimes blank')) == []


@pytest.mark.parametrize("old, new", [
    (FIRST, FIRST.replace("test_sft_is_right_about_three_times_in_four", "test_each_prompt_has_22621_responses")),
    (FIRST, FIRST.replace("),", ', "lab12.reward_model.ceiling"),')),                    # one backing more
    (FIRST, FIRST.replace('"lab11"', '"lab12"')),                                          # another notebook
    (FIRST, ""),                                                                           # a claim removed
    ('r"falls?|grows?|', 'r"falls?|grows?|soars?|'),                                      # any other code
    ('        ok = c not in gone and c not in bad', '        ok = c not in bad'),
])
def test_control_what_the_run_checks_or_computes_names_the_figure_stale(ledger, old, new):
    assert ledger(edited(old, new)) == [provenance.LEDGER]


def test_the_science_tables_fingerprint_ignores_a_quote_and_follows_a_backing(monkeypatch):
    """The rule where it acts: science.json's fingerprint (the files benchmarks.science reads, the ledger's
    tests among them) with the ledger's text as it would be after each edit."""
    tests = claims.cited_tests()
    real = provenance.file_code

    def fingerprint_with(text):
        monkeypatch.setattr(provenance, "file_code", lambda rel, root=provenance.REPO: (
            provenance._code(rel, text.encode()) if rel == provenance.LEDGER else real(rel, root)))
        return provenance.fingerprint("science.json", tests=tests)

    now = fingerprint_with(SOURCE)
    assert provenance.LEDGER in provenance.science_files(tests=tests)
    assert fingerprint_with(edited(QUOTE, "so it is right about 4 times in 5")) == now
    another = FIRST.replace("test_sft_is_right_about_three_times_in_four", "test_each_prompt_has_22621_responses")
    assert fingerprint_with(edited(FIRST, another)) != now
