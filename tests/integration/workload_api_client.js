// A SPIFFE Workload API client on npm's @grpc/grpc-js, with @grpc/proto-loader reading our
// proto/workload.proto at run time: the second client stack of the Workload API tests
// (test_workload_api_grpcjs.py runs it as a process of a pod, as another user). It finds the
// agent as SPIFFE clients do, through SPIFFE_ENDPOINT_SOCKET=unix:///path, and prints one JSON
// object per line in the shapes workload_api_client.py prints: each response, or the error.
//
//   node workload_api_client.js OP --proto PATH [--no-header] [--count N] [--timeout S]
//                               [--streams N] [--audience A]... [--spiffe-id ID] [--token JWT]
//
// OP: svid | bundles | jwt-svid | jwt-bundles | validate | many | verify-svid | verify-jwt
// The verify ops check what the agent hands out with node's own crypto, as a JS workload would:
// verify-svid its X.509-SVID chain against the FetchX509Bundles bundle, verify-jwt a token
// (--token, --audience) against the JWKS from FetchJWTBundles.
// Written for Debian 12's node 18: CommonJS, nothing newer.
'use strict';

const crypto = require('crypto');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// op -> [method name on the generated client, streaming]
const METHODS = {
  'svid': ['FetchX509SVID', true],
  'bundles': ['FetchX509Bundles', true],
  'jwt-svid': ['FetchJWTSVID', false],
  'jwt-bundles': ['FetchJWTBundles', true],
  'validate': ['ValidateJWTSVID', false],
};

function parseArgs(argv) {
  const args = { op: argv[0], noHeader: false, count: 1, timeout: 30, streams: 500, audience: [],
                 spiffeId: '', token: '', proto: null };
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(a + ' needs a value');
      return argv[++i];
    };
    if (a === '--no-header') args.noHeader = true;
    else if (a === '--count') args.count = Number(next());
    else if (a === '--timeout') args.timeout = Number(next());
    else if (a === '--streams') args.streams = Number(next());
    else if (a === '--audience') args.audience.push(next());
    else if (a === '--spiffe-id') args.spiffeId = next();
    else if (a === '--token') args.token = next();
    else if (a === '--proto') args.proto = next();
    else throw new Error('unknown argument ' + a);
  }
  if (!METHODS[args.op] && !['many', 'verify-svid', 'verify-jwt'].includes(args.op)) {
    throw new Error('unknown op ' + args.op);
  }
  if (!args.proto) throw new Error('--proto is required');
  return args;
}

function out(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// The spec's service has no package: it is SpiffeWorkloadAPI at the top level.
function newClient(protoPath) {
  const def = protoLoader.loadSync(protoPath, { keepCase: true, longs: Number, enums: String, defaults: true,
                                                oneofs: true });
  const Service = grpc.loadPackageDefinition(def).SpiffeWorkloadAPI;
  const target = process.env.SPIFFE_ENDPOINT_SOCKET;  // unix:///path, as the spec spells it
  if (!target) throw new Error('SPIFFE_ENDPOINT_SOCKET is not set');
  return new Service(target, grpc.credentials.createInsecure());
}

// google.protobuf.Struct as proto-loader decodes it (oneofs: the set kind is named) to plain JSON.
function structValue(v) {
  switch (v.kind) {
    case 'nullValue': return null;
    case 'numberValue': return v.numberValue;
    case 'stringValue': return v.stringValue;
    case 'boolValue': return v.boolValue;
    case 'structValue': return structToJson(v.structValue);
    case 'listValue': return (v.listValue.values || []).map(structValue);
    default: return undefined;
  }
}

function structToJson(s) {
  const o = {};
  for (const [k, v] of Object.entries((s && s.fields) || {})) o[k] = structValue(v);
  return o;
}

function hexMap(m) {
  const o = {};
  for (const [k, v] of Object.entries(m || {})) o[k] = Buffer.from(v).toString('hex');
  return o;
}

function describe(op, resp) {
  switch (op) {
    case 'svid':
      return { svids: resp.svids.map((s) => ({ spiffe_id: s.spiffe_id, x509_svid: s.x509_svid.toString('hex'),
                                               key: s.x509_svid_key.toString('hex'),
                                               bundle: s.bundle.toString('hex') })) };
    case 'bundles':
      return { bundles: hexMap(resp.bundles) };
    case 'jwt-svid':
      return { svids: resp.svids.map((s) => ({ spiffe_id: s.spiffe_id, svid: s.svid })) };
    case 'jwt-bundles': {
      const b = {};
      for (const [k, v] of Object.entries(resp.bundles || {})) b[k] = JSON.parse(Buffer.from(v).toString('utf8'));
      return { bundles: b };
    }
    case 'validate':
      return { spiffe_id: resp.spiffe_id, claims: structToJson(resp.claims) };
  }
  return { message: resp };
}

const STATUS_NAMES = Object.fromEntries(Object.entries(grpc.status).map(([name, code]) => [code, name]));

function error(e) {
  return { error: STATUS_NAMES[e.code] || String(e.code), details: e.details };
}

function metadata(withHeader) {
  const md = new grpc.Metadata();
  if (withHeader) md.set('workload.spiffe.io', 'true');
  return md;
}

function request(args) {
  if (args.op === 'jwt-svid') return { audience: args.audience, spiffe_id: args.spiffeId };
  if (args.op === 'validate') return { audience: args.audience[0] || '', svid: args.token };
  return {};
}

function deadline(args) {
  return { deadline: new Date(Date.now() + args.timeout * 1000) };
}

// One call: a unary answer, or the first --count responses of a stream, then cancelled.
function single(client, args) {
  const [method, streaming] = METHODS[args.op];
  const t0 = Date.now();
  return new Promise((resolve) => {
    if (!streaming) {
      client[method](request(args), metadata(!args.noHeader), deadline(args), (err, resp) => {
        out(err ? error(err) : describe(args.op, resp));
        resolve();
      });
      return;
    }
    const call = client[method](request(args), metadata(!args.noHeader), deadline(args));
    let n = 0;
    let done = false;
    const finish = () => {
      if (!done) {
        done = true;
        resolve();
      }
    };
    call.on('data', (resp) => {
      if (done) return;
      const d = describe(args.op, resp);
      d.t = Date.now() / 1000;
      d.elapsed = (Date.now() - t0) / 1000;  // from connecting (the channel is lazy) to this response
      out(d);
      if (++n >= args.count) {
        finish();
        call.cancel();
      }
    });
    call.on('error', (e) => {
      if (!done) out(error(e));
      finish();
    });
    call.on('end', finish);
  });
}

// Waits for a line (or the end) on stdin, then lets go of it so that it keeps the process alive
// no longer.
function readLine() {
  return new Promise((resolve) => {
    let buf = '';
    const done = () => {
      process.stdin.destroy();
      resolve();
    };
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (chunk) => {
      buf += chunk;
      if (buf.includes('\n')) done();
    });
    process.stdin.once('end', done);
  });
}

// N concurrent FetchX509SVID streams on one channel (one HTTP/2 connection): all answered, then,
// once the test has looked at the agent (a line on stdin), all cancelled.
async function many(client, args) {
  const t0 = Date.now();
  const calls = [];
  const firsts = [];
  for (let i = 0; i < args.streams; i++) {
    const call = client.FetchX509SVID({}, metadata(true), deadline(args));
    calls.push(call);
    firsts.push(new Promise((resolve) => {
      call.once('data', (resp) => resolve({ id: resp.svids[0].spiffe_id }));
      call.once('error', (e) => resolve({ err: error(e) }));
    }));
    call.on('error', () => {});  // the cancellation below ends every call with CANCELLED
  }
  const results = await Promise.all(firsts);
  const seconds = (Date.now() - t0) / 1000;
  const ids = [...new Set(results.filter((r) => r.id).map((r) => r.id))].sort();
  const errors = results.filter((r) => r.err).map((r) => r.err);
  out({ answered: args.streams - errors.length, ids: ids, errors: errors.slice(0, 5), seconds: seconds });
  await readLine();
  for (const c of calls) c.cancel();
  out({ cancelled: calls.length });
}

// The first response of a stream, then the stream cancelled.
function first(client, method) {
  return new Promise((resolve, reject) => {
    const call = client[method]({}, metadata(true), { deadline: new Date(Date.now() + 30000) });
    call.once('data', (resp) => {
      call.removeListener('error', reject);
      call.on('error', () => {});
      call.cancel();
      resolve(resp);
    });
    call.once('error', reject);
  });
}

// Concatenated DER certificates, split by their outer SEQUENCE's length.
function splitDer(buf) {
  const certs = [];
  let i = 0;
  while (i < buf.length) {
    if (buf[i] !== 0x30) throw new Error('not a DER SEQUENCE at ' + i);
    let hdr = 2;
    let n = buf[i + 1];
    if (n & 0x80) {
      hdr = 2 + (n & 0x7f);
      n = buf.subarray(i + 2, i + hdr).reduce((acc, b) => acc * 256 + b, 0);
    }
    certs.push(new crypto.X509Certificate(buf.subarray(i, i + hdr + n)));
    i += hdr + n;
  }
  return certs;
}

// Walks from the leaf through the chain to a root of the bundle, signature by signature.
function verifyChain(chain, roots) {
  let cert = chain[0];
  const issuers = chain.slice(1).concat(roots);
  for (let hops = 0; hops <= issuers.length; hops++) {
    const parent = issuers.find((c) => cert.checkIssued(c) && cert.verify(c.publicKey));
    if (!parent) return 'no issuer in chain or bundle for ' + cert.subject;
    if (roots.includes(parent)) return null;
    cert = parent;
  }
  return 'chain does not end at a bundle root';
}

// The X509-SVID spec: exactly one URI SAN, the SPIFFE ID; other kinds may be there too.
function uriSans(cert) {
  return (cert.subjectAltName || '').split(', ').filter((e) => e.startsWith('URI:')).map((e) => e.slice(4));
}

async function verifySvid(client) {
  const svids = await first(client, 'FetchX509SVID');
  const bundles = await first(client, 'FetchX509Bundles');
  const svid = svids.svids[0];
  const chain = splitDer(svid.x509_svid);
  const td = svid.spiffe_id.replace(/^(spiffe:\/\/[^/]+).*$/, '$1');
  const roots = splitDer(Buffer.from(bundles.bundles[td] || []));
  const key = crypto.createPrivateKey({ key: svid.x509_svid_key, format: 'der', type: 'pkcs8' });
  const problem = roots.length === 0 ? 'no bundle for ' + td :
    !chain[0].checkPrivateKey(key) ? 'the key is not the leaf\'s' :
    uriSans(chain[0]).join() !== svid.spiffe_id ? 'URI SANs ' + uriSans(chain[0]) :
    verifyChain(chain, roots);
  out(problem ? { verified: false, reason: problem } : { verified: true, spiffe_id: svid.spiffe_id });
}

function b64u(s) {
  return Buffer.from(s.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}

async function verifyJwt(client, args) {
  const resp = await first(client, 'FetchJWTBundles');
  const [h64, c64, s64] = args.token.split('.');
  const header = JSON.parse(b64u(h64).toString('utf8'));
  const claims = JSON.parse(b64u(c64).toString('utf8'));
  const td = String(claims.sub || '').replace(/^(spiffe:\/\/[^/]+).*$/, '$1');
  const jwks = JSON.parse(Buffer.from(resp.bundles[td] || '{"keys":[]}').toString('utf8'));
  const jwk = jwks.keys.find((k) => k.kid === header.kid);
  let problem = null;
  if (header.alg !== 'ES256') problem = 'alg ' + header.alg;
  else if (!jwk) problem = 'no key ' + header.kid + ' in the JWKS of ' + td;
  else if (!crypto.verify('sha256', Buffer.from(h64 + '.' + c64),
                          { key: crypto.createPublicKey({ key: jwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' },
                          b64u(s64))) problem = 'bad signature';
  else if (![].concat(claims.aud).includes(args.audience[0])) problem = 'audience';
  else if (!(claims.exp > Date.now() / 1000)) problem = 'expired';
  out(problem ? { verified: false, reason: problem } : { verified: true, sub: claims.sub, kid: header.kid });
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const client = newClient(args.proto);
  try {
    if (args.op === 'many') await many(client, args);
    else if (args.op === 'verify-svid') await verifySvid(client);
    else if (args.op === 'verify-jwt') await verifyJwt(client, args);
    else await single(client, args);
  } finally {
    client.close();
  }
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exitCode = 1;
});
