/**
 * Why a job name is not valid, for the form's check as the user types. The server decides
 * (jupyter_hyperpod/core/names.py): these are its words, character for character, pinned to the
 * same cases (tests/name_cases.json, read by tests/test_names.py and names.spec.ts).
 */

const MAX_NAME = 52;
const ALLOWED = /^[a-z0-9-]$/;
const UPPER = /^[A-Z]$/;

const SPOKEN: Record<string, string> = {
  ' ': 'a space',
  '\t': 'a tab',
  '\n': 'a line break'
};

function listed(chars: string[]): string {
  const words = chars.map(char => SPOKEN[char] ?? `'${char}'`);
  return words.length === 1
    ? words[0]
    : `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`;
}

/** What is wrong with `name` as a job name (the server's message), or null when it is valid. */
export function validateName(name: string): string | null {
  // Code points, as Python counts them (an emoji is one character, not two).
  const chars = Array.from(name);
  if (chars.length === 0) {
    return 'a job needs a name';
  }
  if (chars.length > MAX_NAME) {
    return `at most ${MAX_NAME} characters (${chars.length} given)`;
  }
  const upper: string[] = [];
  const bad: string[] = [];
  for (const char of chars) {
    const seen = UPPER.test(char) ? upper : ALLOWED.test(char) ? null : bad;
    if (seen && !seen.includes(char)) {
      seen.push(char);
    }
  }
  const problems: string[] = [];
  if (upper.length) {
    problems.push(`${listed(upper)} must be lowercase`);
  }
  if (bad.length) {
    const verb = bad.length === 1 ? 'is' : 'are';
    problems.push(`${listed(bad)} ${verb} not allowed`);
  }
  if (problems.length) {
    return `${problems.join('; ')} (a job name takes lowercase letters, digits and '-')`;
  }
  if (chars[0] === '-' || chars[chars.length - 1] === '-') {
    return "start and end with a letter or digit, not '-'";
  }
  return null;
}
