// The README's tour through the TypeScript client, against the base URL and key in
// CODEPORT_BASE_URL and CODEPORT_API_KEY, with the order CODEPORT_ORDER_CODE. Every step asserts
// what the API answers; the last line of output is a JSON summary, which the root package's
// TestClientTours, that compiles and runs this file against codeport dev, checks again.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";

import { createCodeportClient, type Schemas } from "../src/index.js";

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

const api = createCodeportClient({ baseUrl: env("CODEPORT_BASE_URL"), apiKey: env("CODEPORT_API_KEY") });
const orderCode = env("CODEPORT_ORDER_CODE");
const product = "99000000000001";
const quantity = 2;

// Ping, then a failure asked for with the sandbox header.
const ping = await api.GET("/ping");
assert.equal(ping.response.status, 200);
assert.equal(ping.data?.status, "ok");
assert.ok(Math.abs(Date.parse(ping.data.timestamp) - Date.now()) < 60_000, `ping timestamp ${ping.data.timestamp}`);
const limited = await api.GET("/ping", { params: { header: { "X-Sandbox-Scenario": "rate-limited" } } });
assert.equal(limited.response.status, 429);
assert.equal(limited.error?.statusCode, 429);
assert.match(limited.error.message, /^Rate limit exceeded\./);

// The catalog, and the scenario of the product the tour orders.
const catalog = await api.GET("/catalog/products", { params: { query: { country: "de", take: 5 } } });
assert.equal(catalog.response.status, 200);
assert.ok(catalog.data);
assert.equal(catalog.data.take, 5);
assert.ok(catalog.data.count > 0 && catalog.data.products.length > 0 && catalog.data.products.length <= 5);
for (const p of catalog.data.products) {
  assert.ok(p.name, `product ${p.productCode} has no name`);
  assert.equal(p.countryCode.toLowerCase(), "de");
}
const scenarios = await api.GET("/sandbox/scenarios");
assert.equal(scenarios.response.status, 200);
assert.ok(scenarios.data?.scenarios.some((s) => s.productCode === product && s.expectedStatus === "completed"));

// The order: placed, replayed, refused under another body, then polled until final.
const before = await walletEUR();
const placement: Schemas["PlaceOrder"] = {
  externalOrderCode: orderCode,
  currency: "EUR",
  orderProducts: [{ productCode: product, quantity }],
};
const placed = await api.POST("/orders", { body: placement });
assert.equal(placed.response.status, 202);
assert.equal(placed.data?.status, "processing");
assert.equal(placed.data.externalOrderCode, orderCode);
const replayed = await api.POST("/orders", { body: placement });
assert.equal(replayed.response.status, 200);
assert.equal(replayed.response.headers.get("Idempotent-Replayed"), "true");
assert.equal(replayed.data?.orderId, placed.data.orderId);
const conflict = await api.POST("/orders", {
  body: { ...placement, orderProducts: [{ productCode: product, quantity: 1 }] },
});
assert.equal(conflict.response.status, 409);
assert.equal(conflict.error?.statusCode, 409);

let order: Schemas["Order"] | undefined;
for (const deadline = Date.now() + 30_000; ; await sleep(100)) {
  const got = await api.GET("/orders/{reference}", { params: { path: { reference: orderCode } } });
  assert.equal(got.response.status, 200);
  assert.ok(got.data);
  order = got.data;
  if (order.status !== "processing") break;
  assert.ok(Date.now() < deadline, `order ${orderCode} still processing`);
}
assert.equal(order.status, "completed");
assert.equal(order.orderId, placed.data.orderId);
assert.equal(order.products?.length, 1);
const line = order.products[0];
assert.ok(line);
assert.equal(line.productCode, product);
assert.equal(line.codes.length, quantity);
const codes = line.codes.map((c) => c.code);
assert.equal(new Set(codes).size, quantity, `codes ${codes.join(", ")} are not distinct`);
for (const code of codes) assert.match(code, /^SANDBOX-/);

// The order history, the wallet debited by the order, the debit first in the statement.
const history = await api.GET("/orders", {
  params: { query: { status: "completed", externalOrderCode: orderCode } },
});
assert.equal(history.response.status, 200);
assert.equal(history.data?.orders.length, 1);
assert.equal(history.data.orders[0]?.orderId, order.orderId);
const debit = line.price * quantity;
const after = await walletEUR();
assert.ok(Math.abs(before - debit / 100 - after) < 0.001, `wallet ${before} EUR before, ${after} after ${debit}`);
const statement = await api.GET("/wallet/transactions", { params: { query: { currency: "EUR" } } });
assert.equal(statement.response.status, 200);
const newest = statement.data?.entries[0];
assert.equal(newest?.type, "order_debit");
assert.equal(newest.amount, -debit);
assert.equal(newest.orderId, order.orderId);

console.log(JSON.stringify({ ping: ping.data.status, orderId: order.orderId, status: order.status, codes,
  walletBefore: before, walletAfter: after, debit }));

async function walletEUR(): Promise<number> {
  const wallet = await api.GET("/wallet");
  assert.equal(wallet.response.status, 200);
  const balance = wallet.data?.balances["EUR"];
  assert.ok(balance !== undefined, "the wallet has no EUR balance");
  return balance;
}
