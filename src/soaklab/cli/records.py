"""`soaklab record ...` and `support-matrix`: benchmark records and the matrix made from them."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from soaklab.errors import InvalidInput


def figure_text(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def cmd_record_check(args: argparse.Namespace) -> int:
    from soaklab.records import store

    names = args.names or sorted(p.name for p in args.records.iterdir() if p.is_dir() and not p.name.startswith("."))
    for name in names:
        record = store.load(args.records, name)
        sets = record.artifact_sets()
        for artifacts in record.artifact_folders():
            store.require_spec_agrees(record, artifacts)
        state = f"artifacts of record of {', '.join(s.name for s in sets)}" if sets else "no artifacts of record yet"
        print(f"record {name}: ok ({record.machine}, {record.algo}/{record.task}/{record.sim}, seeds "
              f"{', '.join(str(r.seed) for r in record.runs)}, {len(record.figures)} figures"
              f"{', exact series' if record.exact else ''}"
              f"{f', numerics {record.numerics.label}' if record.numerics else ''}; {state})")
    return 0


def cmd_record_list(args: argparse.Namespace) -> int:
    from soaklab.records import plan, store

    names = sorted(p.name for p in args.records.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))) \
        if args.records.is_dir() else []
    records = {name: store.load(args.records, name) for name in names}  # a bad spec: exit 2, naming it
    print(",".join(plan.ci_records(records) if args.ci else names))
    return 0


def cmd_record_compare(args: argparse.Namespace) -> int:
    from soaklab.records import store
    from soaklab.records.compare import compare
    from soaklab.records.outcome import headline, write_comparison

    record = store.load(args.records, args.name)
    now = store.take_all(record, args.results)
    provenance, recorded = store.read_recorded(record, store.kind_of(now))
    comparison = compare(record, provenance, recorded, now)
    comparison["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_comparison(comparison, args.out, args.html)
    print(f"{headline(comparison)}; {args.out}")
    return 0


def cmd_record_verdict(args: argparse.Namespace) -> int:
    from soaklab.records.outcome import read_comparison, verdict_lines

    comparison = read_comparison(args.comparison)
    print("\n".join(verdict_lines(comparison)))
    # A reproduction that cannot be judged bit for bit is still judged on its learning figures.
    if comparison["verdict"] in ("fail", "incomplete") or comparison.get("statistics") == "fail":
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(comparison["verdict"] + "\n")
    return 0


def cmd_record_keep(args: argparse.Namespace) -> int:
    from soaklab.records import store
    from soaklab.records.outcome import read_comparison

    comparison = args.comparison or args.results / "reproduce" / args.name / "comparison.json"
    path = store.keep(args.records, args.name, read_comparison(comparison))
    print(f"record {args.name}: reproduction kept in {path}; `soaklab support-matrix` reads it")
    return 0


def cmd_support_matrix(args: argparse.Namespace) -> int:
    from soaklab.files.jsonfiles import write_text_atomic
    from soaklab.support.matrix import build, differences

    root = Path.cwd()
    if not (root / "src" / "soaklab" / "config" / "defaults").is_dir() or not (root / "records").is_dir():
        raise InvalidInput(f"support-matrix: {root} is not a soaklab checkout (no src/soaklab/config/defaults "
                           "or records/); run it from the repository root")
    try:
        expected, refused = build(root)
    except ValueError as exc:  # a malformed marker, a configuration with no owner, a README without markers
        raise InvalidInput(f"support-matrix: {exc}") from None
    # A record file refused was refused for its record only (every other record is judged and listed);
    # it is still an error: one line each, and a non-zero exit once the rest is done.
    for line in refused:
        print(f"soaklab: error: {line}", file=sys.stderr)
    if args.check:
        diff = differences(root, expected)
        if diff:
            print("\n".join(diff))
            print(f"support-matrix: {', '.join(str(p) for p in expected)} differ from the generator's; "
                  "run `soaklab support-matrix` and commit the result", file=sys.stderr)
            return 2 if refused else 1
        print(f"support-matrix: {', '.join(str(p) for p in expected)} match the generator")
        return 2 if refused else 0
    for rel, text in expected.items():
        write_text_atomic(root / rel, text)
    print(f"support-matrix: wrote {', '.join(str(p) for p in expected)}")
    return 1 if refused else 0  # written, the refused records given no credit: not exit 2's "nothing written"


def cmd_record_incomplete(args: argparse.Namespace) -> int:
    from soaklab.records.outcome import mark_incomplete

    mark_incomplete(args.name, args.out, args.reason)
    return 0


def cmd_record_update(args: argparse.Namespace) -> int:
    from soaklab.records import store

    if args.cores < 1:
        raise InvalidInput(f"--cores={args.cores}: expected an integer >= 1")
    record, change = store.update(args.records, args.name, args.cores, args.directory, args.passthrough, args.argv)
    if change is None:
        print(f"record {record.name}: written (first record); {record.folder}")
    else:
        # Every figure whose value moved, not only those outside their band: the diff of the rewrite.
        moved = [f"  {row['verdict']}: {row['name']}: {figure_text(row.get('record'))} -> {figure_text(row.get('now'))}"
                 for row in change["figures"] if row.get("record") != row.get("now")]
        print(f"record {record.name}: rewritten; against the previous record: {change['verdict']}")
        print("\n".join(moved) if moved else "  every figure equal to the previous record's")
    return 0


def cmd_record_bisect(args: argparse.Namespace) -> int:
    from soaklab.records.bisect import Request, bisect

    request = Request(args.name, args.good, args.bad, args.python, args.cores, tuple(args.passthrough), args.out,
                      args.retry_skipped)
    result = bisect(request, Path.cwd())
    print(f"record {result['record']}: first commit that does not reproduce it: {result['first_bad'][:7]} "
          f"{result['subject']!r}")
    if result["skipped_before_it"]:
        print(f"  or one of the skipped commits before it: {', '.join(c[:7] for c in result['skipped_before_it'])}")
    first = result.get("first_difference")
    if first and first.get("series"):
        print(f"  first difference: {first['series']} at step {first['step']} ({first.get('run')}): "
              f"{first.get('record')!r} on record, {first.get('now')!r} there")
    for line in result.get("failed") or []:
        print(f"  fail: {line}")
    if result["skipped"]:
        print(f"  skipped (did not build or run): {', '.join(c[:7] for c in result['skipped'])}")
    steps = result["steps"]
    print(f"  {len(steps)} commit(s) reproduced in {sum(s['seconds'] for s in steps):.0f} s; {result['state']}"
          + (f"; {args.out}" if args.out else ""))
    return 0


def cmd_record_history(args: argparse.Namespace) -> int:
    from soaklab.files.outpaths import refuse_overlaps
    from soaklab.records import history, history_page, store
    from soaklab.records.plan import NAME, record_folders

    if bool(args.names) == args.all:
        raise InvalidInput("record history: name the records, or pass --all (not both)")
    for name in args.names:  # the name as typed, not the folder it resolves to (`../x`)
        if not NAME.match(name):
            raise InvalidInput(f"record {name!r}: not a record name (lower-case letters, digits and '-')")
    schema = args.records.absolute().parent / "workflow" / "schemas" / "config.schema.yaml"
    if not schema.is_file():  # the record specs are checked against the workflow's own schema
        raise InvalidInput(f"--records {args.records}: not in a soaklab checkout (no workflow/schemas/"
                           "config.schema.yaml beside it); run it from the repository root")
    refuse_overlaps({"--records": args.records}, {"--out-dir": args.out_dir})
    names = args.names or [folder.name for folder in record_folders(args.records)]
    records = [store.load(args.records, name) for name in names]  # a bad spec or name: exit 2 before anything
    comparisons = history.read_comparisons(args.comparison or [])
    if comparisons and len(records) != 1:
        raise InvalidInput("--comparison: adds to one record's history; name that record alone")
    if comparisons:
        history.check_record_of(comparisons, records[0])
    from soaklab.records.bisect import toplevel

    try:
        repo: Path | None = toplevel(args.records.resolve())
    except InvalidInput:  # a copy without git (an unpacked archive): the working tree's points only
        repo = None
    failed = False
    for record in records:
        doc = history.history(repo, record, comparisons)
        out_json, out_html = history_page.write(doc, args.out_dir)
        verdict = doc["regression"]
        print(f"record {record.name}: {len(doc['points'])} point(s) on {len(verdict['machines'])} machine kind(s); "
              f"regression verdict {verdict['verdict']}; {out_html}")
        for kind, judged in verdict["machines"].items():
            for key, row in judged["figures"].items():
                print(f"  {kind}: {key}: {row['verdict']}: {row['detail']}")
        failed = failed or verdict["verdict"] == "fail"
    return 1 if failed and args.fail_on_regression else 0


def add_record_commands(sub: Any) -> None:
    """Record and support-matrix: benchmark records and the support levels."""
    record = sub.add_parser("record", help="benchmark records: check, compare, update (docs/records.md)"
                            ).add_subparsers(dest="action", required=True, metavar="ACTION")
    records_help = "the records folder"
    listing = record.add_parser("list", help="the records' names, comma-separated (with --ci: those CI reproduces)")
    listing.add_argument("--records", type=Path, default=Path("records"), help="the records folder")
    listing.add_argument("--ci", action="store_true", help="only the records CI reproduces on every run (ci: true)")
    listing.set_defaults(func=cmd_record_list)
    check = record.add_parser("check", help="read and check record specs (exit 2 naming the record and field)")
    check.add_argument("names", nargs="*", metavar="NAME", help="records to check (every record when none)")
    check.add_argument("--records", type=Path, default=Path("records"), help=records_help)
    check.set_defaults(func=cmd_record_check)
    compare = record.add_parser("compare", help="compare a record's reproduced runs with the record")
    compare.add_argument("name", metavar="NAME", help="the record")
    compare.add_argument("--records", type=Path, default=Path("records"), help=records_help)
    compare.add_argument("--results", type=Path, default=Path("results"), help="the DAG's results folder")
    compare.add_argument("--out", type=Path, required=True, help="the comparison JSON")
    compare.add_argument("--html", type=Path, help="the comparison as an HTML page")
    compare.set_defaults(func=cmd_record_compare)
    verdict = record.add_parser("verdict", help="print a comparison's verdict; exit 1 on fail or incomplete")
    verdict.add_argument("comparison", type=Path, metavar="COMPARISON", help="a comparison JSON")
    verdict.add_argument("--out", type=Path, required=True, help="the verdict, written when it is not a failure")
    verdict.set_defaults(func=cmd_record_verdict)
    incomplete = record.add_parser("incomplete", help="mark a reproduction's comparison incomplete (the DAG's onerror)")
    incomplete.add_argument("name", metavar="NAME", help="the record")
    incomplete.add_argument("--out", type=Path, required=True, help="the comparison JSON")
    incomplete.add_argument("--reason", required=True, help="why it stopped")
    incomplete.set_defaults(func=cmd_record_incomplete)
    keep = record.add_parser("keep", help="keep a passing reproduction in the record (the support matrix's evidence)")
    keep.add_argument("name", metavar="NAME", help="the record")
    keep.add_argument("--records", type=Path, default=Path("records"), help=records_help)
    keep.add_argument("--results", type=Path, default=Path("results"), help="the DAG's results folder")
    keep.add_argument("--comparison", type=Path,
                      help="the comparison JSON (default: RESULTS/reproduce/NAME/comparison.json)")
    keep.set_defaults(func=cmd_record_keep)
    update = record.add_parser("update", help="rerun a record's seeds through the workflow and rewrite the record",
                               usage="soaklab record update NAME [options] [-- SNAKEMAKE_ARGS ...]",
                               epilog="Arguments after -- go to Snakemake as they are (--configfile local.yaml).")
    update.add_argument("name", metavar="NAME", help="the record")
    update.add_argument("--records", type=Path, default=Path("records"), help=records_help)
    update.add_argument("--cores", type=int, default=1, help="Snakemake's --cores")
    update.add_argument("--directory", type=Path, help="Snakemake's working directory (results/ under it)")
    update.set_defaults(func=cmd_record_update, passthrough=[])

    bisect = record.add_parser(
        "bisect", help="the first commit at which a record's reproduction changes (each commit in a worktree)",
        usage="soaklab record bisect NAME --good REV --bad REV [options] [-- SNAKEMAKE_ARGS ...]",
        epilog="Arguments after -- go to each commit's Snakemake as they are (--configfile local.yaml).")
    bisect.add_argument("name", metavar="NAME", help="the record")
    bisect.add_argument("--good", required=True, metavar="REV", help="a commit that reproduces the record")
    bisect.add_argument("--bad", required=True, metavar="REV",
                        help="a later commit on the same first-parent line that does not (the record as at it)")
    bisect.add_argument("--python", type=Path, metavar="PATH",
                        help="one interpreter for every commit (default: each commit's `make setup` environment, "
                             "one per set-up hash, reused)")
    bisect.add_argument("--cores", type=int, default=1, help="Snakemake's --cores for each commit")
    bisect.add_argument("--out", type=Path, help="the result as JSON (outside records/, .soaklab/ and the "
                        "repository's tracked files; the state file holds it too)")
    bisect.add_argument("--retry-skipped", action="store_true",
                        help="judge again the commits an earlier run skipped (the good and bad ends always are)")
    bisect.set_defaults(func=cmd_record_bisect, passthrough=[])

    hist = record.add_parser("history", help="a record's sets, kept reproductions and CI results over commits, "
                             "with a regression verdict: JSON and an HTML page per record")
    hist.add_argument("names", nargs="*", metavar="NAME", help="the records")
    hist.add_argument("--all", action="store_true", help="every record")
    hist.add_argument("--records", type=Path, default=Path("records"), help=records_help)
    hist.add_argument("--out-dir", type=Path, default=Path("docs/records/history"),
                      help="where NAME.json and NAME.html go (default: the committed pages the README links)")
    hist.add_argument("--comparison", type=Path, action="append", metavar="JSON",
                      help="a reproduction's comparison to add as a point (CI's); repeatable")
    hist.add_argument("--fail-on-regression", action="store_true", help="exit 1 when a verdict is fail")
    hist.set_defaults(func=cmd_record_history)

    matrix = sub.add_parser("support-matrix", help="write docs/support-matrix.md and .json from the validation "
                            "inventory (docs/support-levels.md)")
    matrix.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with a diff when the committed files differ from the generator's")
    matrix.set_defaults(func=cmd_support_matrix)
