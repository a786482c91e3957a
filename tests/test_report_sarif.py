"""SARIF 2.1.0 output, validated against the official schema with jsonschema."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

import graphlint
from conftest import REPO_ROOT
from graphlint.finding import Finding
from graphlint.report import ReportOptions, rule_url, write
from graphlint.report.sarif import document
from graphlint.rules import ALL_CODES, RULES_BY_CODE

# CI clones the repository with shared/ beside it; nothing of the schema is vendored here.
SCHEMA_PATH = REPO_ROOT.parent / "shared" / "schemas" / "sarif-2.1.0.json"


@pytest.fixture(scope="module")
def validator():
    if not SCHEMA_PATH.is_file():
        pytest.skip(f"the official SARIF schema is not at {SCHEMA_PATH} (expected beside the repository)")
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)


def sarif(findings, **options) -> dict:
    out = io.StringIO()
    write("sarif", findings, out, ReportOptions(**options))
    return json.loads(out.getvalue())


def finding(code="GL001", line=4, col=5, end_col=20, path="train.py", **changes) -> Finding:
    return Finding(code, f"{code} message", path, line, col, line, end_col).with_(**changes)


def assert_valid(validator, log: dict) -> None:
    errors = sorted(validator.iter_errors(log), key=lambda error: list(error.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])


def test_an_empty_run_is_valid(validator):
    log = sarif([])
    assert_valid(validator, log)
    assert log["version"] == "2.1.0" and log["runs"][0]["results"] == []


def test_the_driver_describes_the_tool_and_every_rule(validator):
    log = sarif([finding()])
    assert_valid(validator, log)
    driver = log["runs"][0]["tool"]["driver"]
    assert driver["name"] == "graphlint"
    assert driver["version"] == graphlint.__version__
    assert driver["informationUri"].startswith("https://")
    assert [rule["id"] for rule in driver["rules"]] == list(ALL_CODES)
    for rule in driver["rules"]:
        assert rule["name"] and rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["defaultConfiguration"]["level"] in ("error", "warning")
        if rule["id"] in RULES_BY_CODE:
            assert rule["helpUri"] == rule_url(rule["id"])
            assert rule["shortDescription"]["text"] == RULES_BY_CODE[rule["id"]].SUMMARY
            assert "## What it does" in rule["fullDescription"]["text"]


def test_a_result_has_rule_level_message_and_region(validator, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "my train.py").write_text("import torch\n\n\n    loss.backward()\n")
    log = sarif([finding("GL002", 4, 5, 20, path="pkg/my train.py")])
    assert_valid(validator, log)
    [result] = log["runs"][0]["results"]
    assert result["ruleId"] == "GL002"
    assert log["runs"][0]["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "GL002"
    assert result["level"] == "error"
    assert result["message"]["text"] == "GL002 message"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/my%20train.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 4, "startColumn": 5, "endLine": 4, "endColumn": 20}
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"


def test_fingerprints_survive_moved_lines_and_tell_repeats_apart(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = Path("train.py")
    source.write_text("for x in data:\n    loss.backward()\n    loss.backward()\n")
    before = sarif([finding(line=2), finding(line=3)])["runs"][0]["results"]
    source.write_text("import torch\n\n\nfor x in data:\n    loss.backward()\n    loss.backward()\n")
    after = sarif([finding(line=5), finding(line=6)])["runs"][0]["results"]
    assert [r["partialFingerprints"] for r in before] == [r["partialFingerprints"] for r in after]
    first, second = (r["partialFingerprints"]["primaryLocationLineHash"] for r in before)
    assert first != second and first.split(":")[0] == second.split(":")[0]
    other_rule = sarif([finding("GL005", line=2)])["runs"][0]["results"][0]["partialFingerprints"]
    assert other_rule != before[0]["partialFingerprints"]


def test_a_fix_becomes_a_sarif_fix(validator):
    fix = {
        "applicability": "safe",
        "message": "Detach the hidden state",
        "edits": [{"content": "hidden.detach()", "location": {"row": 4, "column": 9},
                   "end_location": {"row": 4, "column": 15}}],
    }
    log = sarif([finding(fix=fix)])
    assert_valid(validator, log)
    [sarif_fix] = log["runs"][0]["results"][0]["fixes"]
    assert sarif_fix["description"]["text"] == "Detach the hidden state"
    [change] = sarif_fix["artifactChanges"]
    assert change["replacements"] == [
        {"deletedRegion": {"startLine": 4, "startColumn": 9, "endLine": 4, "endColumn": 15},
         "insertedContent": {"text": "hidden.detach()"}}
    ]
    assert "fixes" not in sarif([finding()])["runs"][0]["results"][0]


class Verdict:
    def to_json(self) -> dict:
        return {"status": "confirmed", "evidence": "RuntimeError at line 4, iteration 2", "iterations": 2,
                "seconds": 0.4}


def test_the_confirmation_verdict_goes_in_the_properties(validator):
    log = sarif([finding(confirmation=Verdict())])
    assert_valid(validator, log)
    assert log["runs"][0]["results"][0]["properties"]["confirmation"]["status"] == "confirmed"


def test_gl000_and_absolute_paths_are_valid(validator, tmp_path):
    outside = tmp_path / "elsewhere.py"
    log = sarif([finding("GL000", 1, 1, 1, path=str(outside))])
    assert_valid(validator, log)
    [result] = log["runs"][0]["results"]
    assert result["level"] == "warning"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": outside.as_uri()}


def test_the_cli_writes_valid_sarif(validator, run_cli, tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nloss.backward()\nfor x in data\n")
    result = run_cli("check", "--output-format", "sarif", "broken.py")
    assert result.exit_code == 1
    log = json.loads(result.stdout)
    assert_valid(validator, log)
    [item] = log["runs"][0]["results"]
    assert item["ruleId"] == "GL000"
    assert item["locations"][0]["physicalLocation"]["region"]["startLine"] == 3


def test_the_bundled_fixtures_give_valid_sarif(validator):
    from graphlint.checker import check_source

    findings = []
    for path in sorted((REPO_ROOT / "fixtures").rglob("*.py"))[:40]:
        findings.extend(check_source(path.read_bytes(), str(path)))
    log = document(findings)
    assert_valid(validator, log)
    assert len(log["runs"][0]["results"]) == len(findings)


def test_the_schema_check_can_fail(validator):
    log = sarif([finding()])
    log["runs"][0]["results"][0]["level"] = "fatal"
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert len(list(validator.iter_errors(log))) == 2
