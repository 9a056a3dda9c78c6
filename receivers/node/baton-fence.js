'use strict';
// Fence a write with baton's token, for receivers of baton's HTTP jobs.
//
// baton sends every request with Baton-Election and Baton-Token. A write
// fenced by FileFence.write is refused (StaleToken) when a newer token of
// the same election has written the same resource: a late request of a
// term that has ended cannot overwrite a newer term's work. Tokens of
// another election are refused (OtherElection), never compared.
//
//   const fence = new FileFence('/var/lib/app/fence.json', 'billing');
//   const { election, token } = tokenFromHeaders(req);
//   await fence.write('invoices', election, token, () => save(...));
//
// The fence file is shared by the processes of one host (a lock file
// beside it orders them; the Python module locks otherwise: give each its
// own fence file). Processes on several hosts need the fence where
// the data is: a row in the same database, checked in the write's
// transaction (see docs/fencing.md). Node.js 18 and later, no packages.

const fs = require('node:fs');

class StaleToken extends Error {
  constructor(resource, token, fence) {
    super(`stale token ${token}: ${fence} has written ${resource}`);
    Object.assign(this, { name: 'StaleToken', resource, token, fence });
  }
}

class OtherElection extends Error {
  constructor(election, want) {
    super(`token of election ${JSON.stringify(election)}, fence of election ${JSON.stringify(want)}`);
    Object.assign(this, { name: 'OtherElection', election, want });
  }
}

// tokenFromHeaders returns { election, token } (token a BigInt) from
// baton's request (anything with get(name), as Express's req, or a
// headers object). It throws a TypeError naming the header: answer 400.
function tokenFromHeaders(req) {
  const get = (name) => (typeof req.get === 'function' ? req.get(name) : req[name.toLowerCase()]) || '';
  const election = get('Baton-Election');
  const raw = get('Baton-Token');
  if (!election) throw new TypeError('Baton-Election: missing');
  if (!/^[0-9]+$/.test(raw) || BigInt(raw) < 1n) {
    throw new TypeError(`Baton-Token ${JSON.stringify(raw)}: want a decimal token from 1`);
  }
  return { election, token: BigInt(raw) };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

// FileFence keeps the highest token written per resource, for one
// election, in a file. write() holds a lock file (created exclusively,
// holding its owner's pid; a dead owner's lock is taken over) while it
// checks the token, records it, and runs the write: the older token's
// write after the newer's is refused. The token is recorded (fsync,
// rename) before the write runs: a crash between them loses the write,
// never the fence.
class FileFence {
  constructor(path, election) {
    if (!election) throw new TypeError('FileFence: election: empty');
    this.path = path;
    this.election = election;
    this.queue = Promise.resolve(); // this process's writers take turns
  }

  async lock() {
    const lockPath = `${this.path}.node-lock`;
    for (;;) {
      try {
        fs.writeFileSync(lockPath, String(process.pid), { flag: 'wx' });
        return () => fs.rmSync(lockPath, { force: true });
      } catch (e) {
        if (e.code !== 'EEXIST') throw e;
      }
      let owner = 0;
      try {
        owner = Number(fs.readFileSync(lockPath, 'utf8'));
      } catch {
        continue; // released meanwhile
      }
      if (owner > 0 && !alive(owner)) {
        // Its owner died: take it over with a rename, which only one
        // of the waiters wins.
        const stale = `${lockPath}.${process.pid}`;
        try {
          fs.renameSync(lockPath, stale);
          if (Number(fs.readFileSync(stale, 'utf8')) === owner) fs.rmSync(stale, { force: true });
          else fs.renameSync(stale, lockPath); // a live owner's: put back
        } catch {
          // another waiter took it over
        }
        continue;
      }
      await sleep(2);
    }
  }

  read() {
    try {
      return JSON.parse(fs.readFileSync(this.path, 'utf8'));
    } catch (e) {
      if (e.code === 'ENOENT') return {};
      throw e;
    }
  }

  save(state) {
    const tmp = `${this.path}.tmp`;
    const fd = fs.openSync(tmp, 'w');
    fs.writeSync(fd, JSON.stringify(state));
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fs.renameSync(tmp, this.path);
  }

  // write runs fn() (which may be async) if token is not older than
  // resource's fence, and returns its result. It rejects with
  // OtherElection for another election's token and StaleToken when a
  // newer token has written resource: fn does not run. A token equal to
  // the fence's passes (a term writes many times).
  write(resource, election, token, fn) {
    const run = async () => {
      if (election !== this.election) throw new OtherElection(election, this.election);
      const t = BigInt(token);
      if (t < 1n) throw new TypeError(`token ${token}: want a token from 1`);
      const unlock = await this.lock();
      try {
        const state = this.read();
        const key = `${election}/${resource}`;
        const last = BigInt(state[key] ?? 0);
        if (t < last) throw new StaleToken(resource, t, last);
        if (t !== last) {
          state[key] = t.toString();
          this.save(state);
        }
        return await fn();
      } finally {
        unlock();
      }
    };
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => {});
    return p;
  }

  // reset forgets resource's fence: the operator's remedy when the
  // election's token counter started over below it. Make sure the old
  // term's processes are gone first.
  async reset(resource) {
    const unlock = await this.lock();
    try {
      const state = this.read();
      delete state[`${this.election}/${resource}`];
      this.save(state);
    } finally {
      unlock();
    }
  }
}

module.exports = { FileFence, StaleToken, OtherElection, tokenFromHeaders };

// node baton-fence.js fence-file fence-election token-election resource
// token data-file: write token to data-file under the fence (a test of
// the fence from the command line). Exit 0 written, 3 stale, 4 other
// election.
if (require.main === module) {
  const [path, own, election, resource, token, data] = process.argv.slice(2);
  new FileFence(path, own)
    .write(resource, election, BigInt(token), () => {
      fs.writeFileSync(`${data}.tmp`, token);
      fs.renameSync(`${data}.tmp`, data);
    })
    .then(
      () => process.exit(0),
      (e) => {
        console.error(e.message);
        process.exit(e instanceof StaleToken ? 3 : e instanceof OtherElection ? 4 : 1);
      },
    );
}
