#!/usr/bin/env python3
"""Prefix-cache check against a lockstep OpenAI-compatible server: one cold request, sequential repeats and
concurrent copies of the same long prompt, comparing cached/prefilled token counts, TTFT and token_sha.

Prints one JSON line per request and a final summary line to stdout; notes go to stderr.
"""
import argparse
import json
import random
import sys
import threading


from lockstep_client import ApiError, add_common_flags, median, note, request_json, resolve_model, stream_request

SUBJECTS = ["The archivist", "A tired courier", "The village council", "An old sailor", "The night baker",
            "A young engineer", "The museum guard", "A travelling violinist", "The river pilot", "A botanist"]
VERBS = ["catalogued", "carried", "debated", "remembered", "sketched", "repaired", "counted", "described",
         "measured", "translated"]
OBJECTS = ["the brass instruments", "a box of letters", "the new bridge plans", "seven silver coins",
           "the winter harvest", "a broken telescope", "the tide tables", "an unfinished map",
           "the chapel bells", "a crate of lemons"]
PLACES = ["before sunrise", "in the northern quarter", "beside the canal", "under the station clock",
          "during the storm", "at the edge of the orchard", "inside the lighthouse", "on the ferry",
          "near the old mill", "after the market closed"]
QUESTION = "\n\nIn one sentence, what is the passage above about?\n"


def word_pool(rng, count):
    """At least count words of varied sentences drawn from rng."""
    words = []
    while len(words) < count:
        s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)}."
        words.extend(s.split())
    return words


def token_count(text, args):
    reply = request_json(args.url, "/tokenize", {"prompt": text}, args.api_key, args.timeout)
    if "count" in reply:
        return int(reply["count"])
    return len(reply["tokens"])


def fit_prompt(args):
    """A nonce-prefixed prompt whose /tokenize count is within 5% of --prompt-tokens, and that count."""
    nonce = f"{random.SystemRandom().getrandbits(64):016x}"
    rng = random.Random(nonce)
    header = f"Session {nonce}.\n"
    target, tol = args.prompt_tokens, args.prompt_tokens * 0.05
    words = word_pool(rng, 2 * target + 16)

    def text(k):
        return header + " ".join(words[:k]) + QUESTION

    lo, hi, k, best = 0, None, max(1, int(target / 1.4)), None
    for _ in range(40):
        while len(words) < k:
            words.extend(word_pool(rng, k - len(words)))
        n = token_count(text(k), args)
        if best is None or abs(n - target) < abs(best[1] - target):
            best = (k, n)
        if abs(n - target) <= tol:
            break
        if n < target:
            lo = max(lo, k)
        else:
            hi = k if hi is None else min(hi, k)
        guess = round(k * target / max(n, 1))
        if guess <= lo or (hi is not None and guess >= hi):
            guess = (lo + hi) // 2 if hi is not None else 2 * max(lo, 1)
        if guess == k or guess < 1 or (hi is not None and hi - lo <= 1):
            break
        k = guess
    k, n = best
    if abs(n - target) > tol:
        note(f"prompt fit to {n} tokens, outside 5% of {target}")
    return text(k), n


def make_body(prompt, model, args):
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "seed": args.seed,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def measure(phase, i, body, args):
    """Streams one request and returns its row (without the qualification fields)."""
    row = {"phase": phase, "i": i}
    try:
        r = stream_request(args.url, "/v1/completions", body, args.api_key, args.timeout)
    except ApiError as e:
        note(f"{phase} {i} failed: {e}")
        return dict(row, error=str(e))
    usage = r["final"].get("usage") or {}
    ls = r["final"].get("lockstep") or {}
    return dict(
        row,
        prompt_tokens=usage.get("prompt_tokens"),
        cached_tokens=(usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
        prefilled_tokens=ls.get("prefilled_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        ttft_s=None if r["t_first"] is None else r["t_first"] - r["t_send"],
        server_ttft_s=ls.get("ttft_s"),
        server_prefill_s=ls.get("prefill_s"),
        token_sha=ls.get("token_sha"),
    )


def qualify(row, args):
    """Marks whether a row qualifies as cold (first request) or as reuse (later requests), with reasons."""
    why = []
    if "error" in row:
        why.append("request failed")
    else:
        prompt, cached, prefilled = row["prompt_tokens"], row["cached_tokens"] or 0, row["prefilled_tokens"]
        if row["token_sha"] is None:
            why.append("no token_sha")
        if prompt is None or prefilled is None:
            why.append("missing prompt_tokens or prefilled_tokens")
        elif row["phase"] == "cold":
            if cached != 0 or prefilled != prompt:
                why.append(f"not cold: cached {cached}, prefilled {prefilled} of {prompt}")
        elif cached <= 0 or prefilled != prompt - cached:
            why.append(f"no reuse: cached {cached}, prefilled {prefilled} of {prompt}")
        if args.expected_prompt_tokens is not None and prompt != args.expected_prompt_tokens:
            why.append(f"prompt_tokens {prompt} != expected {args.expected_prompt_tokens}")
    row["qualified"] = not why
    row["why"] = why
    return row


def run_concurrent(body, args):
    rows = [None] * args.concurrent
    barrier = threading.Barrier(args.concurrent)

    def worker(i):
        barrier.wait()
        rows[i] = measure("concurrent", i, body, args)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(args.concurrent)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rows


def ratio(a, b):
    return a / b if a is not None and b else None


def summarise(rows, count, args):
    cold = rows[0]
    repeats = [r for r in rows if r["phase"] == "repeat"]
    copies = [r for r in rows if r["phase"] == "concurrent"]
    shas = [r.get("token_sha") for r in rows]
    sha_equal = all(s is not None for s in shas) and len(set(shas)) == 1
    failed = sum("error" in r for r in rows)
    prompt_ok = args.expected_prompt_tokens is None or all(
        r.get("prompt_tokens") == args.expected_prompt_tokens for r in rows)
    reuse_ok = all(r["qualified"] for r in repeats + copies)
    cached_ttft = median(r.get("ttft_s") for r in repeats)
    server_cached_ttft = median(r.get("server_ttft_s") for r in repeats)
    qualified = (sha_equal and not failed and prompt_ok
                 and (cold["qualified"] or not args.require_cold)
                 and (reuse_ok or not args.require_reuse))
    return {
        "summary": True,
        "prompt_tokens_target": args.prompt_tokens,
        "tokenize_count": count,
        "cold_ttft_s": cold.get("ttft_s"),
        "cached_ttft_s_median": cached_ttft,
        "concurrent_ttft_s_median": median(r.get("ttft_s") for r in copies),
        "speedup": ratio(cold.get("ttft_s"), cached_ttft),
        "server_cold_ttft_s": cold.get("server_ttft_s"),
        "server_cached_ttft_s_median": server_cached_ttft,
        "server_speedup": ratio(cold.get("server_ttft_s"), server_cached_ttft),
        "all_token_sha_equal": sha_equal,
        "cold_qualified": cold["qualified"],
        "reuse_qualified": reuse_ok,
        "prompt_tokens_ok": prompt_ok,
        "failed": failed,
        "qualified": qualified,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_flags(p)
    p.add_argument("--prompt-tokens", type=int, default=512, help="approximate prompt length in tokens")
    p.add_argument("--repeats", type=int, default=3, help="sequential repeats after the cold request")
    p.add_argument("--concurrent", type=int, default=2, help="concurrent copies after the repeats")
    p.add_argument("--max-tokens", type=int, default=8, help="max_tokens per request")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    p.add_argument("--require-cold", action="store_true", help="fail unless the first request is cold")
    p.add_argument("--require-reuse", action="store_true", help="fail unless every later request reuses the cache")
    p.add_argument("--expected-prompt-tokens", type=int, default=None, help="fail unless prompt_tokens equals K")
    args = p.parse_args()
    if args.prompt_tokens < 1 or args.repeats < 0 or args.concurrent < 0:
        p.error("--prompt-tokens must be positive; --repeats and --concurrent non-negative")
    try:
        model = resolve_model(args)
        prompt, count = fit_prompt(args)
    except (ApiError, KeyError, TypeError, ValueError) as e:
        note(f"setup failed: {e!r}")
        return 2
    note(f"model {model} at {args.url}, prompt of {count} tokens by /tokenize, "
         f"{args.repeats} repeats, {args.concurrent} concurrent")
    body = make_body(prompt, model, args)
    rows = [measure("cold", 0, body, args)]
    rows += [measure("repeat", i, body, args) for i in range(args.repeats)]
    if args.concurrent:
        rows += run_concurrent(body, args)
    for row in rows:
        print(json.dumps(qualify(row, args)), flush=True)
    summary = summarise(rows, count, args)
    print(json.dumps(summary), flush=True)
    return 0 if summary["qualified"] else 1


if __name__ == "__main__":
    sys.exit(main())
