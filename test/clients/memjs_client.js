// The client scenario (see run_clients.py) through memjs (binary protocol).
//
// usage: NODE_PATH=.../node_modules node memjs_client.js HOST PORT PREFIX binary
//
// Prints one "STEP ok|FAIL|n/a DETAIL" line per step; exits 1 if a step
// failed. The driver holds a lock on PREFIX + "locked" (value "held").
'use strict';

const memjs = require('memjs');

const [host, port, prefix] = process.argv.slice(2);
let failures = 0;

function report(step, ok, detail) {
  console.log(`${step} ${ok ? 'ok' : 'FAIL'} ${detail}`);
  if (!ok) failures++;
}

function newClient() {
  // retries: 1, so that a refused request is not sent twice.
  return memjs.Client.create(`${host}:${port}`,
                             {retries: 1, timeout: 10, logger: {log() {}}});
}

async function attempt(action) {
  try {
    return [await action(), null];
  } catch (error) {
    return [null, `${error.name}: ${error.message}`];
  }
}

async function valueOf(client, key) {
  const {value} = await client.get(key);
  return value === null ? null : value.toString();
}

// memjs has no call for a custom opcode or a CAS, but Client#perform sends
// any request buffer and hands back the parsed response (header, key, val).
function perform(client, key, request) {
  return new Promise((resolve, reject) => {
    client.incrSeq();
    request.writeUInt32BE(client.seq, 12);  // the opaque pairs reply and callback
    client.perform(key, request, client.seq, (error, response) => {
      if (error) reject(error); else resolve(response);
    });
  });
}

function keyRequest(opcode, key) {
  return memjs.Utils.makeRequestBuffer(opcode, key, '', '', 0);
}

function setRequest(key, value, cas) {
  const extras = Buffer.alloc(8);  // flags 0, exptime 0
  const request = memjs.Utils.makeRequestBuffer(0x01, key, extras, value, 0);
  cas.copy(request, 16);
  return request;
}

async function casStep(client, c) {
  await client.set(c, 'v1', {});
  const stale = (await perform(client, c, keyRequest(0x00, c))).header.cas;
  await client.set(c, 'v2', {});
  const refused = (await perform(client, c, setRequest(c, 'v3', stale))).header.status;
  const fresh = (await perform(client, c, keyRequest(0x00, c))).header.cas;
  const accepted = (await perform(client, c, setRequest(c, 'v3', fresh))).header.status;
  report('cas', refused === 0x02 && accepted === 0 && await valueOf(client, c) === 'v3',
         `through Client#perform: stale cas status ${refused}, fresh cas status ${accepted}`);
}

async function lockStep(client, other, mine) {
  await client.set(mine, 'v1', {});
  const taken = (await perform(client, mine, keyRequest(0x40, mine))).header.status;
  const [stored, error] = await attempt(() => other.set(mine, 'v2', {}));
  const readable = await valueOf(other, mine) === 'v1';
  const released = (await perform(client, mine, keyRequest(0x42, mine))).header.status;
  const after = await other.set(mine, 'v2', {});
  report('lock', taken === 0 && !stored && readable && released === 0 && after === true,
         `lock (0x40) status ${taken}; another client's set meanwhile: ${error || stored}; ` +
         `unlock (0x42) status ${released}; set after it ${after}`);
}

async function main() {
  const client = newClient();
  const other = newClient();
  const k = `${prefix}k`;
  report('store', await client.set(k, 'v1', {}) === true, 'set resolves true');
  report('read', await valueOf(client, k) === 'v1' &&
         await valueOf(client, `${prefix}missing`) === null, 'get returns v1, a miss null');

  const deleted = await client.delete(k);
  const gone = await valueOf(client, k) === null;
  const again = await client.delete(k);
  report('delete', deleted === true && gone && again === false,
         `delete ${deleted}, then gone, again ${again}`);

  const n = `${prefix}n`;
  await client.set(n, '10', {});
  const total = await client.increment(n, 5, {});
  // memjs always sends an initial value: a missing counter starts at it.
  const created = await client.increment(`${prefix}missing-counter`, 5, {initial: 7});
  report('incr', total.value === 15 && created.value === 7,
         `10+5=${total.value}, a missing key starts at the initial value ${created.value}`);

  await casStep(client, `${prefix}c`);

  const locked = `${prefix}locked`;
  const before = await valueOf(client, locked);
  const [stored, error] = await attempt(() => client.set(locked, 'mine', {}));
  const [after, readError] = await attempt(() => valueOf(client, locked));
  report('locked', before === 'held' && !stored && after === 'held',
         `set on a locked key: ${error || stored}; read after it: ${readError || after}`);

  await lockStep(client, other, `${prefix}mine`);
  client.close();
  other.close();
}

main().then(() => process.exit(failures === 0 ? 0 : 1), (error) => {
  console.log(`error FAIL ${error.stack}`);
  process.exit(1);
});
