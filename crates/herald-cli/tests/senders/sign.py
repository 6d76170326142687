#!/usr/bin/env python3
"""Signs a webhook request the way a sender does, with the sender's official SDK where one
exists, then checks the result with that sender's official verifier.

    python3 sign.py PRESET --secret S --body-file F --timestamp UNIX_SECONDS
                    [--url URL] [--secret2 S2] [--no-verify]
    python3 sign.py discord --secret SEED_HEX --print-public-key

stdout: one JSON object, {"headers": {"Name": "value", ...}} with only the signature and
timestamp headers (twilio adds "url": the URL actually signed, with bodySHA256 for JSON
bodies); --print-public-key prints {"public_key": "<hex>"}.
Exit 0 on success; 1 when the official verifier rejects what was signed; 2 on bad arguments
or a missing SDK. A message goes to stderr whenever the exit is not 0.

The verifier runs on the same bytes (the body file, the printed headers, the URL) and as of
--timestamp, so an old or future --timestamp still verifies:
- stripe: constructEvent with its default 300 s tolerance and receivedAt = --timestamp;
- slack: SignatureVerifier with a Clock at --timestamp (its window is 300 s);
- paddle: Verifier(maximum_variance=) widened to |now - timestamp| + 5 s (it reads time()
  itself; its default window is 5 s);
- linear: LinearWebhookClient with Date.now() pinned to --timestamp * 1000 (its window is
  60 s against the body's webhookTimestamp, which the body must carry);
- the others check no time.
--no-verify skips the verifier step.

npm packages (stripe, shopify, linear, discord) run in node on sdk.cjs beside this file,
with NODE_PATH=$HERALD_SENDER_NODE_MODULES (default: target/test-cache/senders/node_modules
of the repository; scripts/test installs it). Python packages: slack_sdk, twilio,
paddle-python-sdk, PyNaCl (scripts/test's test virtualenv).
"""

import argparse
import base64
import hashlib
import hmac
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
DEFAULT_URL = "https://herald.test/webhook"
# Presets whose header can carry one signature per secret during a secret roll.
MULTI_SECRET = {"stripe", "paddle", "pagerduty"}


class UsageError(Exception):
    """Exit 2: the request cannot be signed as asked."""


class Rejected(Exception):
    """Exit 1: the official verifier rejected what was signed."""


def hmac_sha256(secret, data):
    return hmac.new(secret.encode("utf-8"), data, hashlib.sha256)


def utf8(body, preset):
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{preset}: the body is not UTF-8, which its SDK requires: {e}")


def node(request):
    modules = os.environ.get("HERALD_SENDER_NODE_MODULES") or str(
        REPO / "target" / "test-cache" / "senders" / "node_modules")
    if not Path(modules).is_dir():
        raise UsageError(
            f"no npm packages at {modules}: run scripts/test (setup_sender_sdks) or set "
            "HERALD_SENDER_NODE_MODULES")
    env = dict(os.environ, NODE_PATH=modules)
    try:
        proc = subprocess.run(["node", str(HERE / "sdk.cjs")], input=json.dumps(request).encode(),
                              capture_output=True, env=env, timeout=120)
    except FileNotFoundError:
        raise UsageError("node is not installed")
    if proc.returncode != 0:
        raise UsageError(proc.stderr.decode(errors="replace").strip()
                         or f"sdk.cjs exited {proc.returncode}")
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise UsageError(f"sdk.cjs printed no JSON: {proc.stdout!r}")


def node_request(op, args, body, **extra):
    return dict(op=op, preset=args.preset, secret=args.secret, secret2=args.secret2,
                body_b64=base64.b64encode(body).decode(), timestamp=args.timestamp,
                url=args.url, **extra)


def node_verify(args, body, headers, **extra):
    answer = node(node_request("verify", args, body, headers=headers, **extra))
    if not answer.get("valid"):
        raise Rejected(answer.get("reason") or "rejected")


# Each preset: sign(args, body) -> (headers, extra output), verify(args, body, headers, out).

def sign_stripe(args, body):
    return node(node_request("sign", args, body))["headers"], {}


def sign_shopify(args, body):
    return node(node_request("sign", args, body))["headers"], {}


def verify_by_node(args, body, headers, out):
    node_verify(args, body, headers)


def sign_slack(args, body):
    from slack_sdk.signature import SignatureVerifier
    utf8(body, "slack")
    timestamp = str(args.timestamp)
    signature = SignatureVerifier(args.secret).generate_signature(timestamp=timestamp, body=body)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature}, {}


def verify_slack(args, body, headers, out):
    from slack_sdk.signature import Clock, SignatureVerifier

    class At(Clock):
        def now(self):
            return float(args.timestamp)

    if not SignatureVerifier(args.secret, clock=At()).is_valid_request(body, headers):
        raise Rejected("slack_sdk SignatureVerifier.is_valid_request returned False")


def sign_linear(args, body):
    # Linear's SDK has no signing helper: hex HMAC-SHA256 of the raw body, as Linear sends.
    headers = {"Linear-Signature": hmac_sha256(args.secret, body).hexdigest()}
    # Linear-Timestamp (ms) mirrors the body's webhookTimestamp; the SDK's verifier reads only
    # the body field.
    stamp = None
    try:
        stamp = json.loads(body).get("webhookTimestamp")
    except (ValueError, AttributeError):
        pass
    if not isinstance(stamp, int) or isinstance(stamp, bool):
        stamp = args.timestamp * 1000
    headers["Linear-Timestamp"] = str(stamp)
    return headers, {}


def paddle_h1(secret, timestamp, text):
    return hmac_sha256(secret, f"{timestamp}:{text}".encode("utf-8")).hexdigest()


def sign_paddle(args, body):
    text = utf8(body, "paddle")
    parts = [f"ts={args.timestamp}"]
    parts += [f"h1={paddle_h1(s, args.timestamp, text)}" for s in secrets(args)]
    return {"Paddle-Signature": ";".join(parts)}, {}


def verify_paddle(args, body, headers, out):
    from paddle_billing.Notifications import Secret, Verifier

    class Request:
        def __init__(self):
            self.body = body
            self.headers = headers

    # Its window (default 5 s, both ways) is against time(): widened to cover --timestamp.
    variance = max(5, math.ceil(abs(time.time() - args.timestamp)) + 5)
    for secret in secrets(args):
        if not Verifier(maximum_variance=variance).verify(Request(), Secret(secret)):
            raise Rejected("paddle_billing Verifier.verify returned False")


class FormParams:
    """Form parameters with repeated keys, as Flask's MultiDict / Django's QueryDict give
    RequestValidator (a plain dict would keep one value per key)."""

    def __init__(self, pairs):
        self.pairs = pairs

    def __iter__(self):
        return iter(dict.fromkeys(k for k, _ in self.pairs))

    def __bool__(self):
        return bool(self.pairs)

    def getlist(self, key):
        return [v for k, v in self.pairs if k == key]


def twilio_request(args, body):
    """(url signed, params for compute_signature, params for validate)"""
    text = utf8(body, "twilio")
    try:
        json.loads(text)
        is_json = True
    except ValueError:
        is_json = False
    if not is_json:
        params = FormParams(parse_qsl(text, keep_blank_values=True))
        return args.url, params, params
    from twilio.request_validator import RequestValidator
    digest = RequestValidator(args.secret).compute_hash(text)
    url = args.url
    if urlsplit(url).query:
        url += "&"
    elif not url.endswith("?"):
        url += "?"
    return url + "bodySHA256=" + digest, {}, text


def sign_twilio(args, body):
    from twilio.request_validator import RequestValidator
    if not args.url_given:
        raise UsageError("twilio signs the URL: give --url")
    url, params, _ = twilio_request(args, body)
    signature = RequestValidator(args.secret).compute_signature(url, params)
    return {"X-Twilio-Signature": signature}, {"url": url}


def verify_twilio(args, body, headers, out):
    from twilio.request_validator import RequestValidator
    _, _, params = twilio_request(args, body)
    if not RequestValidator(args.secret).validate(out["url"], params, headers["X-Twilio-Signature"]):
        raise Rejected("twilio RequestValidator.validate returned False")


def discord_key(args):
    from nacl.signing import SigningKey
    try:
        seed = bytes.fromhex(args.secret)
    except ValueError:
        seed = b""
    if len(seed) != 32:
        raise UsageError("discord: --secret must be a 32-byte Ed25519 seed in hex (64 characters)")
    return SigningKey(seed)


def sign_discord(args, body):
    timestamp = str(args.timestamp)
    signed = discord_key(args).sign(timestamp.encode() + body)
    return {"X-Signature-Ed25519": signed.signature.hex(), "X-Signature-Timestamp": timestamp}, {}


def verify_discord(args, body, headers, out):
    public_key = discord_key(args).verify_key.encode().hex()
    node_verify(args, body, headers, public_key=public_key)


# Senders without an SDK: signed and checked as their documentation says.

def sign_hub(args, body):  # jira, bitbucket
    return {"X-Hub-Signature": "sha256=" + hmac_sha256(args.secret, body).hexdigest()}, {}


def verify_hub(args, body, headers, out):
    expected = "sha256=" + hmac_sha256(args.secret, body).hexdigest()
    if not hmac.compare_digest(expected, headers["X-Hub-Signature"]):
        raise Rejected("X-Hub-Signature does not match HMAC-SHA256 of the body")


def sign_pagerduty(args, body):
    value = ",".join("v1=" + hmac_sha256(s, body).hexdigest() for s in secrets(args))
    return {"X-PagerDuty-Signature": value}, {}


def verify_pagerduty(args, body, headers, out):
    # PagerDuty's documented verifier (developer docs, "Verifying Signatures"), per secret.
    signatures = headers["X-PagerDuty-Signature"].split(",")
    for secret in secrets(args):
        signed = "v1=" + hmac.new(secret.encode("ascii"), body, hashlib.sha256).hexdigest()
        if not any(hmac.compare_digest(signed, item) for item in signatures):
            raise Rejected("no v1 signature in X-PagerDuty-Signature matches")


def sign_sentry(args, body):
    return {"Sentry-Hook-Signature": hmac_sha256(args.secret, body).hexdigest(),
            "Sentry-Hook-Timestamp": str(args.timestamp)}, {}


def plain_hex(name):
    def sign(args, body):
        return {name: hmac_sha256(args.secret, body).hexdigest()}, {}

    def verify(args, body, headers, out):
        if not hmac.compare_digest(hmac_sha256(args.secret, body).hexdigest(), headers[name]):
            raise Rejected(f"{name} does not match HMAC-SHA256 of the body")
    return sign, verify


def verify_sentry(args, body, headers, out):
    if not hmac.compare_digest(hmac_sha256(args.secret, body).hexdigest(),
                               headers["Sentry-Hook-Signature"]):
        raise Rejected("Sentry-Hook-Signature does not match HMAC-SHA256 of the body")


PRESETS = {
    "stripe": (sign_stripe, verify_by_node),
    "shopify": (sign_shopify, verify_by_node),
    "slack": (sign_slack, verify_slack),
    "linear": (sign_linear, verify_by_node),
    "paddle": (sign_paddle, verify_paddle),
    "twilio": (sign_twilio, verify_twilio),
    "discord": (sign_discord, verify_discord),
    "jira": (sign_hub, verify_hub),
    "pagerduty": (sign_pagerduty, verify_pagerduty),
    "sentry": (sign_sentry, verify_sentry),
    "bitbucket": (sign_hub, verify_hub),
    "gitea": plain_hex("X-Gitea-Signature"),
    "forgejo": plain_hex("X-Forgejo-Signature"),
}


def secrets(args):
    return [args.secret] + ([args.secret2] if args.secret2 else [])


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("preset", choices=sorted(PRESETS))
    p.add_argument("--secret", required=True)
    p.add_argument("--secret2", help="a second secret (stripe, paddle, pagerduty: secret roll)")
    p.add_argument("--body-file")
    p.add_argument("--timestamp", type=int, help="UNIX seconds")
    p.add_argument("--url")
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--print-public-key", action="store_true",
                   help="discord: print the Ed25519 public key of --secret and exit")
    args = p.parse_args(argv)
    if args.print_public_key:
        if args.preset != "discord":
            p.error("--print-public-key is for discord")
        return args
    if args.body_file is None or args.timestamp is None:
        p.error("--body-file and --timestamp are required")
    if args.secret2 and args.preset not in MULTI_SECRET:
        p.error(f"{args.preset} sends one signature: --secret2 is for {', '.join(sorted(MULTI_SECRET))}")
    if not args.secret:
        p.error("--secret is empty")
    args.url_given = args.url is not None
    if args.url is None:
        args.url = DEFAULT_URL
    return args


def main(argv):
    args = parse(argv)
    try:
        if args.print_public_key:
            print(json.dumps({"public_key": discord_key(args).verify_key.encode().hex()}))
            return 0
        try:
            body = Path(args.body_file).read_bytes()
        except OSError as e:
            raise UsageError(f"cannot read --body-file: {e}")
        sign, verify = PRESETS[args.preset]
        headers, extra = sign(args, body)
        out = {"headers": headers, **extra}
        if not args.no_verify:
            verify(args, body, headers, out)
    except UsageError as e:
        print(f"sign.py {args.preset}: {e}", file=sys.stderr)
        return 2
    except Rejected as e:
        print(f"sign.py {args.preset}: the official verifier rejected the signed request: {e}",
              file=sys.stderr)
        return 1
    except ImportError as e:
        print(f"sign.py {args.preset}: {e} (scripts/test installs the pinned packages)",
              file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
