/**
 * The extension's styles are loaded from style/index.js (package.json `styleModule`); style/
 * index.css lists the same sheets for tools that read CSS. A sheet in one and not the other
 * is a view left unstyled in one of them (gpu.css and apply.css were missing from index.js).
 */
export {};

declare function require(name: string): any;
declare const __dirname: string;

const fs = require('fs');
const path = require('path');

const STYLE: string = path.resolve(__dirname, '../../style');

function sheets(file: string, pattern: RegExp): string[] {
  const text: string = fs.readFileSync(path.join(STYLE, file), 'utf-8');
  const found: string[] = [];
  for (let m = pattern.exec(text); m; m = pattern.exec(text)) {
    found.push(m[1].replace(/^~/, ''));
  }
  return found.sort();
}

describe('style/index.js and style/index.css', () => {
  it('load the same sheets, every local sheet among them', () => {
    const fromJs = sheets('index.js', /^import '(?:\.\/)?([^']+)';$/gm);
    const fromCss = sheets('index.css', /^@import url\('([^']+)'\);$/gm);
    expect(fromJs).toEqual(fromCss);
    const local = (fs.readdirSync(STYLE) as string[])
      .filter(name => name.endsWith('.css') && name !== 'index.css')
      .sort();
    expect(fromJs.filter(name => !name.includes('/'))).toEqual(local);
  });
});
