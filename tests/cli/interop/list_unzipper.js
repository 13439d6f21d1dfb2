// Lists a zip archive with the npm package unzipper's streaming parser
// (unzipper.Parse walks local headers in file order). Prints JSON:
// [{name, size, text (tags.txt only)}], in file order; exits 3 on an error.
'use strict';
const fs = require('fs');
const unzipper = require('unzipper');

const pending = [];
fs.createReadStream(process.argv[2])
  .pipe(unzipper.Parse())
  .on('entry', (entry) => {
    const name = entry.path;
    pending.push(entry.buffer().then((data) => ({
      name,
      size: data.length,
      text: name === 'tags.txt' ? data.toString('utf8') : undefined,
    })));
  })
  .on('close', async () => {
    try {
      console.log(JSON.stringify(await Promise.all(pending)));
    } catch (e) {
      console.error('error: ' + e.message);
      process.exit(3);
    }
  })
  .on('error', (e) => {
    console.error('error: ' + e.message);
    process.exit(3);
  });
