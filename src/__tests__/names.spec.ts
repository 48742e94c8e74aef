/**
 * The form's instant name check says exactly what the server says: both read the same cases
 * (tests/name_cases.json; tests/test_names.py checks core/names.py against them).
 */
import { validateName } from '../names';

declare function require(name: string): any;
declare const __dirname: string;

const CASES: { name: string; problem: string | null }[] = JSON.parse(
  require('fs').readFileSync(
    require('path').join(__dirname, '..', '..', 'tests', 'name_cases.json'),
    'utf-8'
  )
);

describe("job names in the server's words", () => {
  it('has the cases', () => {
    expect(CASES.length).toBeGreaterThan(10);
  });

  it.each(CASES.map(c => [JSON.stringify(c.name), c.name, c.problem]))(
    '%s',
    (_shown, name, problem) => {
      expect(validateName(name as string)).toBe(problem);
    }
  );

  it('names the wrong characters of "Bad Name!"', () => {
    expect(validateName('Bad Name!')).toBe(
      "'B' and 'N' must be lowercase; a space and '!' are not allowed (a job name takes lowercase letters, digits and '-')"
    );
  });
});
