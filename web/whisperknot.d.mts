// TypeScript looks for a .mjs module's types here: they are in
// whisperknot.d.ts.
export * from './whisperknot.js';
