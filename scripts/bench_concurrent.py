#!/usr/bin/env python3
"""Concurrent streams against a lockstep OpenAI-compatible server: per-stream and aggregate tok/s, optionally
checking that each stream's token_sha and logits_sha match the same request run alone (and with draft off).

Prints one JSON line per (level, temperature) cell to stdout; notes go to stderr.
"""
import argparse
import json
import sys
import threading
import time


from lockstep_client import ApiError, add_common_flags, float_list, median, note, request_json, resolve_model, stream_request

LONG_PARAGRAPH = (
    "Stream {i} is reading a long passage about a harbour town. The fishing boats leave before dawn and return "
    "in the afternoon with crates of mackerel, cod and the occasional lobster. Merchants argue over prices on the "
    "quay while gulls wait for scraps, and children run between the nets that dry in the sun. In the evening the "
    "lamps along the sea wall are lit one by one, and the old lighthouse keeper climbs the spiral stairs to check "
    "the lens, the clockwork and the oil. "
)
LONG_REPEATS = 5


def make_prompt(i, mixed):
    """A distinct prompt for stream i; with mixed lengths the odd streams get a long one."""
    short = f"Request {i}: write a short note about the number {i} and why it is interesting.\n"
    if mixed and i % 2 == 1:
        passage = "".join(LONG_PARAGRAPH.format(i=i) for _ in range(LONG_REPEATS))
        return passage + f"\nSummarise the passage for stream {i} in one paragraph.\n"
    return short


def make_body(i, model, temperature, args, stream):
    body = {
        "model": model,
        "prompt": make_prompt(i, args.mixed_lengths),
        "max_tokens": args.max_tokens,
        "temperature": temperature,
        "seed": args.seed + i,
        "stream": stream,
        "lockstep": {"logits_sha": True},
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def shas(reply):
    """(token_sha, logits_sha) from a reply or final stream chunk, None where missing."""
    ls = (reply or {}).get("lockstep") or {}
    return ls.get("token_sha"), ls.get("logits_sha")


def stream_worker(i, body, barrier, args, out):
    """Waits at the barrier, then streams one request and stores its result in out[i]."""
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        out[i] = {"error": "barrier broken"}
        return
    try:
        out[i] = stream_request(args.url, "/v1/completions", body, args.api_key, args.timeout, retries=0)
    except ApiError as e:
        out[i] = {"error": str(e), "t_end": time.perf_counter()}


def stream_rate(r):
    """Per-stream decode tok/s between the first and last delta, None when undefined."""
    tokens = ((r.get("final") or {}).get("usage") or {}).get("completion_tokens")
    t0, t1 = r.get("t_first"), r.get("t_last")
    if tokens is None or tokens < 2 or t0 is None or t1 is None or t1 <= t0:
        return None
    return (tokens - 1) / (t1 - t0)


def speculative(results):
    """The streams' verify rounds, drafted and accepted tokens, summed."""
    total = {"rounds": 0, "drafted": 0, "accepted": 0}
    for r in results:
        spec = ((r.get("final") or {}).get("lockstep") or {}).get("speculative") or {}
        for k in total:
            total[k] += spec.get(k, 0)
    return total


def compare(level, model, temperature, args, results, draft_off):
    """Re-runs each request alone (one at a time, non-streamed) and counts sha agreement."""
    counts = {"equal": 0, "unequal": 0, "failed": 0}
    for i in range(level):
        body = make_body(i, model, temperature, args, stream=False)
        if draft_off:
            body["draft"] = False
        base = shas(results[i].get("final")) if "error" not in results[i] else (None, None)
        try:
            alone = shas(request_json(args.url, "/v1/completions", body, args.api_key, args.timeout))
        except ApiError as e:
            note(f"level {level} t={temperature:g} stream {i} {'serial' if draft_off else 'alone'} failed: {e}")
            alone = (None, None)
        if None in base or None in alone:
            counts["failed"] += 1
        elif base == alone:
            counts["equal"] += 1
        else:
            counts["unequal"] += 1
            note(f"level {level} t={temperature:g} stream {i} differs {'serial' if draft_off else 'alone'}: "
                 f"token_sha {base[0][:12]} vs {alone[0][:12]}, logits_sha {base[1][:12]} vs {alone[1][:12]}")
    return counts


def expected_reply(i, model, temperature, args):
    """Stream i's reply token ids, from a request run alone with draft off."""
    body = make_body(i, model, temperature, args, stream=False)
    body["draft"] = False
    body["lockstep"]["token_ids"] = True
    return request_json(args.url, "/v1/completions", body, args.api_key, args.timeout)["lockstep"]["token_ids"]


def run_cell(level, temperature, model, args):
    bodies = [make_body(i, model, temperature, args, stream=True) for i in range(level)]
    for i, body in enumerate(bodies):
        if args.draft_off:
            body["draft"] = False
        elif args.forced_acceptance is not None:
            body["lockstep"]["forced_drafts"] = expected_reply(i, model, temperature, args)
            body["lockstep"]["forced_acceptance"] = args.forced_acceptance
    results = [None] * level
    barrier = threading.Barrier(level + 1)
    threads = [threading.Thread(target=stream_worker, args=(i, bodies[i], barrier, args, results), daemon=True)
               for i in range(level)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    errors = [f"stream {i}: {r['error']}" for i, r in enumerate(results) if "error" in r]
    for e in errors:
        note(f"level {level} t={temperature:g} {e}")
    ok = [r for r in results if "error" not in r]
    tokens = [((r.get("final") or {}).get("usage") or {}).get("completion_tokens") for r in results]
    t_last = max((r.get("t_end") or t0 for r in results), default=t0)
    wall = t_last - t0
    total = sum(n for n in tokens if n)
    rates = [None if "error" in r else stream_rate(r) for r in results]
    ttfts = [r["t_first"] - r["t_send"] for r in ok if r.get("t_first") is not None]
    cell = {
        "level": level,
        "temperature": temperature,
        "drafts": "off" if args.draft_off else ("head" if args.forced_acceptance is None else f"forced {args.forced_acceptance:g}"),
        "streams": level,
        "mixed_lengths": args.mixed_lengths,
        "completion_tokens": tokens,
        "per_stream_tok_s": rates,
        "per_stream_tok_s_median": median(rates),
        "aggregate_tok_s": total / wall if wall > 0 and total else None,
        "wall_s": wall,
        "ttft_s_median": median(ttfts),
        "failed_streams": len(errors),
        "speculative": speculative(ok),
        "errors": errors,
        "alone": compare(level, model, temperature, args, results, False) if args.alone else None,
        "serial": compare(level, model, temperature, args, results, True) if args.serial else None,
    }
    return cell


def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_flags(p)
    p.add_argument("--levels", type=int_list, default=[1, 4, 8], help="comma list of stream counts (default 1,4,8)")
    p.add_argument("--temperatures", type=float_list, default=[0.0, 1.0], help="comma list (default 0,1)")
    p.add_argument("--max-tokens", type=int, default=32, help="max_tokens per request")
    p.add_argument("--alone", action="store_true", help="re-run each request alone and compare shas")
    p.add_argument("--serial", action="store_true", help="re-run each request alone with draft off and compare")
    p.add_argument("--mixed-lengths", action="store_true", help="alternate short and long prompts")
    p.add_argument("--draft-off", action="store_true", help="run the concurrent streams with draft off (the undrafted baseline)")
    p.add_argument("--forced-acceptance", type=float, default=None,
                   help="force each stream's drafts from its own undrafted reply, right for this share of each block")
    args = p.parse_args()
    if any(n < 1 for n in args.levels):
        p.error("levels must be positive")
    try:
        model = resolve_model(args)
    except ApiError as e:
        note(f"cannot resolve model: {e}")
        return 2
    note(f"model {model} at {args.url}, levels {args.levels}, max_tokens {args.max_tokens}, seed {args.seed}")
    bad = False
    for level in args.levels:
        for t in args.temperatures:
            cell = run_cell(level, t, model, args)
            for key in ("alone", "serial"):
                if cell[key] and (cell[key]["unequal"] or cell[key]["failed"]):
                    bad = True
            print(json.dumps(cell), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
