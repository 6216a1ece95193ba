#!/usr/bin/env node
'use strict';
// pinhole-node check ...: lib/cli.js.
require('../lib/cli.js').main(process.argv.slice(2)).then((code) => { process.exitCode = code; });
