'use strict';
// A small Node.js service behind a `baton run` sidecar, for TestFence's
// sidecar variant (e2e/fence_node_test.go). POST /write appends
// "TOKEN INSTANCE" to DATA: the resource. With GUARD "1" the write goes
// through the shipped receiver module (receivers/node/baton-fence.js), a
// FileFence in FENCE shared by the apps; with "0" it does not.
//
// The write is held in flight: the app appends "about TOKEN PID
// INSTANCE" to EVENTS, waits until HOLD/go.TOKEN exists (it ignores its
// client's disconnect), writes, and appends "wrote TOKEN PID" or
// "refused TOKEN PID REASON" (409).
//
// usage: node fenceapp.js EVENTS DATA FENCE HOLD GUARD (prints its port)

const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { FileFence, StaleToken, OtherElection, tokenFromHeaders } = require(
  path.join(__dirname, '..', '..', 'receivers', 'node', 'baton-fence.js'),
);

const [events, data, fencePath, hold, guard] = process.argv.slice(2);
const note = (line) => fs.appendFileSync(events, `${line}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function handle(req, res) {
  if (req.method !== 'POST' || req.url !== '/write') {
    res.writeHead(req.url === '/healthz' ? 200 : 404).end();
    return;
  }
  let election;
  let token;
  try {
    ({ election, token } = tokenFromHeaders(req.headers));
  } catch (e) {
    res.writeHead(400).end(`${e.message}\n`);
    return;
  }
  const instance = req.headers['baton-instance'] || '-';
  note(`about ${token} ${process.pid} ${instance}`);
  while (!fs.existsSync(path.join(hold, `go.${token}`))) await sleep(20);
  const save = () => fs.appendFileSync(data, `${token} ${instance}\n`);
  try {
    if (guard === '1') await new FileFence(fencePath, election).write('data', election, token, save);
    else save();
  } catch (e) {
    if (!(e instanceof StaleToken || e instanceof OtherElection)) throw e;
    note(`refused ${token} ${process.pid} ${e.message}`);
    res.writeHead(409).end(`${e.message}\n`);
    return;
  }
  note(`wrote ${token} ${process.pid}`);
  res.writeHead(200).end();
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    console.error(e);
    res.writeHead(500).end();
  });
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
