'use strict';
// The npm half of sign.py: signs and verifies with the senders' official npm packages.
// CommonJS so that NODE_PATH (set by sign.py to $HERALD_SENDER_NODE_MODULES) finds them.
//
// Reads one JSON request on stdin:
//   {"op": "sign"|"verify", "preset": "stripe"|"shopify"|"linear"|"discord",
//    "secret": "...", "secret2": "..."|null, "body_b64": "...", "timestamp": 1700000000,
//    "headers": {...} (verify), "url": "...", "public_key": "<hex>" (discord verify)}
// Writes one JSON answer on stdout:
//   sign:   {"headers": {...}}
//   verify: {"valid": true} or {"valid": false, "reason": "..."}
// Exits 2 with a message on stderr when the request itself cannot be handled.
//
// Verification runs as of the request's timestamp (the sender's clock): stripe through
// constructEvent's receivedAt argument, linear by pinning Date.now() while its verifier runs.

const fs = require('fs');

function fail(message) {
  process.stderr.write(`sdk.cjs: ${message}\n`);
  process.exit(2);
}

function load(name) {
  try {
    return require(name);
  } catch (e) {
    fail(`cannot load npm package ${name} (NODE_PATH=${process.env.NODE_PATH || ''}): ${e.message}`);
  }
}

function header(headers, name) {
  const wanted = name.toLowerCase();
  for (const [k, v] of Object.entries(headers || {})) {
    if (k.toLowerCase() === wanted) return v;
  }
  return undefined;
}

// Runs fn with Date.now() returning ms, restoring it afterwards.
async function atTime(ms, fn) {
  const realNow = Date.now;
  Date.now = () => ms;
  try {
    return await fn();
  } finally {
    Date.now = realNow;
  }
}

const presets = {
  stripe: {
    sign(req, body) {
      const { webhooks } = load('stripe');
      const payload = new TextDecoder('utf8').decode(body);
      let value = webhooks.generateTestHeaderString({ payload, secret: req.secret, timestamp: req.timestamp });
      if (req.secret2) {
        // A secret roll: Stripe sends one v1 per secret in the same header.
        const second = webhooks.generateTestHeaderString({ payload, secret: req.secret2, timestamp: req.timestamp });
        const v1 = second.split(',').filter((item) => item.startsWith('v1='));
        value = [value, ...v1].join(',');
      }
      return { 'Stripe-Signature': value };
    },
    verify(req, body) {
      const { webhooks } = load('stripe');
      const value = header(req.headers, 'Stripe-Signature');
      for (const secret of [req.secret, req.secret2].filter(Boolean)) {
        try {
          // tolerance: the SDK's default (300 s); receivedAt: the request's timestamp.
          webhooks.constructEvent(body, value, secret, undefined, undefined, req.timestamp * 1000);
        } catch (e) {
          return { valid: false, reason: `stripe.webhooks.constructEvent: ${e.message}` };
        }
      }
      return { valid: true };
    },
  },

  shopify: {
    sign(req, body) {
      // The package's own test helper (crypto HMAC-SHA256 of the body string, base64).
      const { getHmac } = load('@shopify/shopify-api/test-helpers');
      return { 'X-Shopify-Hmac-Sha256': getHmac(new TextDecoder('utf8').decode(body), req.secret) };
    },
    async verify(req, body) {
      // The mock adapter is the one the package's own tests use: rawRequest is taken as
      // an already-normalized {method, url, headers} request.
      load('@shopify/shopify-api/adapters/mock');
      const { shopifyApi, ApiVersion, LogSeverity } = load('@shopify/shopify-api');
      const shopify = shopifyApi({
        apiKey: 'herald-test',
        apiSecretKey: req.secret,
        apiVersion: ApiVersion.January25,
        hostName: 'herald.test',
        isEmbeddedApp: false,
        logger: { level: LogSeverity.Error, log: () => {} },
      });
      // webhooks.validate also requires the topic, shop, API version and webhook id headers
      // (not signature headers, so sign.py does not print them): placeholders here.
      const headers = {
        'X-Shopify-Topic': 'orders/create',
        'X-Shopify-Shop-Domain': 'herald-test.myshopify.com',
        'X-Shopify-API-Version': '2025-01',
        'X-Shopify-Webhook-Id': 'herald-test-webhook',
        ...req.headers,
      };
      const result = await shopify.webhooks.validate({
        rawBody: new TextDecoder('utf8').decode(body),
        rawRequest: { method: 'POST', url: req.url || 'https://herald.test/webhook', headers },
      });
      if (result.valid) return { valid: true };
      return { valid: false, reason: `shopify.webhooks.validate: ${result.reason}` };
    },
  },

  linear: {
    async verify(req, body) {
      const { LinearWebhookClient } = load('@linear/sdk/webhooks');
      const client = new LinearWebhookClient(req.secret);
      // Through the SDK's own request handler, with the headers as they would arrive.
      const handler = client.createHandler();
      let seen = false;
      handler.on('*', () => { seen = true; });
      const response = await atTime(req.timestamp * 1000, () => handler(new Request(
        req.url || 'https://herald.test/webhook',
        { method: 'POST', headers: req.headers, body },
      )));
      if (response.status === 200 && seen) return { valid: true };
      let reason = `${response.status} ${await response.text()}`;
      try {
        await atTime(req.timestamp * 1000, () => client.verify(body, header(req.headers, 'Linear-Signature') || ''));
      } catch (e) {
        reason += ` (LinearWebhookClient.verify: ${e.message})`;
      }
      return { valid: false, reason: `LinearWebhookClient handler: ${reason}` };
    },
  },

  discord: {
    async verify(req, body) {
      const { verifyKey } = load('discord-interactions');
      const ok = await verifyKey(
        body,
        header(req.headers, 'X-Signature-Ed25519'),
        header(req.headers, 'X-Signature-Timestamp'),
        req.public_key,
      );
      return ok ? { valid: true } : { valid: false, reason: 'discord-interactions verifyKey returned false' };
    },
  },
};

async function main() {
  let req;
  try {
    req = JSON.parse(fs.readFileSync(0, 'utf8'));
  } catch (e) {
    fail(`bad request on stdin: ${e.message}`);
  }
  const preset = presets[req.preset];
  if (!preset || typeof preset[req.op] !== 'function') fail(`no ${req.op} for preset ${req.preset}`);
  const body = Buffer.from(req.body_b64 || '', 'base64');
  const out = await preset[req.op](req, body);
  process.stdout.write(JSON.stringify(req.op === 'sign' ? { headers: out } : out) + '\n');
}

main().catch((e) => fail(e && e.stack ? e.stack : String(e)));
