// Checks hourglass's push signatures with the reference implementation
// of Standard Webhooks (the standardwebhooks package, pinned in
// package.json), which nobody here wrote.
//
// Alone (`npm ci && npm test`), it checks the test vector that package
// api documents. Run by e2e/webhooks_test.go, HOURGLASS_WEBHOOKS names a
// JSON file of pushes a server made, captured by a receiver:
//
//   {"secrets": ["whsec_…", …],
//    "messages": [{"name": "…", "headers": {"webhook-id": …}, "body": "…", "valid": true}]}
//
// and each message must verify under each secret alone if valid (a push
// carries one signature per secret while a key is rotated), and be
// refused under every secret if not (a push replayed under another
// webhook-id).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Webhook } from "standardwebhooks";

test("api.Push's test vector", () => {
  const wh = new Webhook("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  const sig = wh.sign("msg_1234_1772366399000000000", new Date(1772366400 * 1000), '{"to":"a@b.c"}');
  assert.equal(sig, "v1,IS3WiXOzYY6X8ARsgiyR5OTObsdAehXnTW/9x9LJL6A=");
});

const file = process.env.HOURGLASS_WEBHOOKS;

test("pushes a server made", { skip: !file && "HOURGLASS_WEBHOOKS is not set" }, () => {
  const { secrets, messages } = JSON.parse(readFileSync(file, "utf8"));
  assert.ok(secrets.length > 0 && messages.length > 0, "no secrets or no messages to check");
  for (const m of messages) {
    for (const secret of secrets) {
      const wh = new Webhook(secret);
      if (m.valid) {
        assert.doesNotThrow(() => wh.verify(m.body, m.headers, { jsonParse: false }), `${m.name} under secret ${secrets.indexOf(secret)}`);
      } else {
        assert.throws(() => wh.verify(m.body, m.headers, { jsonParse: false }), /No matching signature/, `${m.name} under secret ${secrets.indexOf(secret)}`);
      }
    }
  }
});
