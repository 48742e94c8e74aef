import {
  effectiveText,
  fieldForError,
  givenParams,
  groupParams,
  initialValues,
  nextName,
  prefillFromJob,
  shellQuote,
  suggestName,
  toSubmission,
  validateForm,
  validateName,
  validateParam
} from '../form';
import { IJob, ITemplateInfo, ITemplateParam } from '../models';

function param(p: Partial<ITemplateParam> & { name: string }): ITemplateParam {
  return {
    title: p.name,
    type: 'string',
    default: null,
    required: false,
    description: '',
    choices: null,
    minimum: null,
    maximum: null,
    group: 'job',
    must_exist: false,
    program: false,
    ...p
  };
}

const template: ITemplateInfo = {
  name: 'qlora',
  title: 'QLoRA',
  description: '',
  params: [
    param({ name: 'script', type: 'path', required: true, title: 'Script' }),
    param({
      name: 'nodes',
      type: 'integer',
      default: 1,
      minimum: 1,
      maximum: 8,
      group: 'resources'
    }),
    param({ name: 'lr', type: 'number', default: 0.0002, group: 'training' }),
    param({
      name: 'precision',
      type: 'choice',
      choices: ['bf16', 'fp32'],
      default: 'bf16',
      group: 'training'
    }),
    param({ name: 'merge', type: 'boolean', default: true, group: 'advanced' }),
    param({ name: 'env', type: 'text', default: '', group: 'advanced' }),
    param({ name: 'queue', type: 'string', group: 'advanced' }),
    param({ name: 'custom', type: 'string', group: 'data' })
  ]
};

describe('form values', () => {
  it('starts from the defaults and then the prefill', () => {
    const values = initialValues(template, {
      script: 'a/train.py',
      nodes: 2,
      merge: false
    });
    expect(values).toEqual({
      script: 'a/train.py',
      nodes: '2',
      lr: '0.0002',
      precision: 'bf16',
      merge: false,
      env: '',
      queue: '',
      custom: ''
    });
    expect(initialValues(template, { env: { A: '1', B: 'x y' } }).env).toBe(
      'A=1\nB=x y'
    );
  });

  it('groups the parameters in form order', () => {
    expect(groupParams(template.params).map(g => g.group)).toEqual([
      'job',
      'resources',
      'training',
      'data',
      'advanced'
    ]);
  });
});

describe('validation as the user types', () => {
  it('checks job names as Kubernetes and Slurm accept them', () => {
    expect(validateName('train-1')).toBeNull();
    expect(validateName('')).toMatch(/needs a name/);
    expect(validateName('Train')).toMatch(/^'T' must be lowercase/);
    expect(validateName('-train')).toBe(
      "start and end with a letter or digit, not '-'"
    );
    expect(validateName('a_b')).toMatch(/^'_' is not allowed/);
    expect(validateName('Bad Name!')).toBe(
      "'B' and 'N' must be lowercase; a space and '!' are not allowed (a job name takes lowercase letters, digits and '-')"
    );
    expect(validateName('a'.repeat(53))).toBe(
      'at most 52 characters (53 given)'
    );
  });

  it('checks numbers, bounds, choices and required fields', () => {
    const [script, nodes, lr, precision, merge] = template.params;
    expect(validateParam(script, '')).toBe('Script is required.');
    expect(validateParam(script, 'x.py')).toBeNull();
    expect(validateParam(nodes, '0')).toBe('At least 1.');
    expect(validateParam(nodes, '9')).toBe('At most 8.');
    expect(validateParam(nodes, '1.5')).toBe('Enter a whole number.');
    expect(validateParam(nodes, 'two')).toBe('Enter a number.');
    expect(validateParam(nodes, '')).toBeNull();
    expect(validateParam(lr, '1e-4')).toBeNull();
    expect(validateParam(precision, 'fp8')).toMatch(
      /Choose one of: bf16, fp32/
    );
    expect(validateParam(merge, false)).toBeNull();
  });

  it('collects every error of the form by field', () => {
    const values = initialValues(template, { nodes: '0' });
    expect(
      validateForm(template, { template: 'qlora', name: 'Bad', values })
    ).toEqual({
      name: "'B' must be lowercase (a job name takes lowercase letters, digits and '-')",
      script: 'Script is required.',
      nodes: 'At least 1.'
    });
  });
});

describe('the submission', () => {
  it('sends typed values and leaves out empty optional ones', () => {
    const values = initialValues(template, {
      script: ' a/train.py ',
      nodes: '2',
      env: 'A=1\n'
    });
    expect(
      toSubmission(template, { template: 'qlora', name: ' job-1 ', values })
    ).toEqual({
      name: 'job-1',
      template: 'qlora',
      params: {
        script: 'a/train.py',
        nodes: 2,
        lr: 0.0002,
        precision: 'bf16',
        merge: true,
        env: 'A=1\n'
      }
    });
  });
});

describe('no silent overrides', () => {
  const withPacking: ITemplateInfo = {
    ...template,
    params: [
      ...template.params,
      param({ name: 'packing', type: 'boolean', group: 'training' }),
      param({ name: 'max_steps', type: 'integer', group: 'training' })
    ]
  };

  it('sends only the fields the user set, and the required ones', () => {
    const values = initialValues(withPacking, { script: 'a.py' });
    const state = {
      template: 'qlora',
      name: 'job',
      values: { ...values, max_steps: '5' },
      given: ['max_steps']
    };
    // packing is an unchecked box the user never touched: not "packing=false".
    expect(toSubmission(withPacking, state).params).toEqual({
      script: 'a.py',
      max_steps: 5
    });
    expect(
      toSubmission(withPacking, {
        ...state,
        values: { ...state.values, packing: false },
        given: ['packing']
      }).params
    ).toEqual({ script: 'a.py', packing: false });
  });

  it('marks as set what a prefill gives a value, and keeps the overrides', () => {
    expect(
      givenParams(withPacking, {
        script: 'a.py',
        nodes: 2,
        packing: null,
        queue: ''
      })
    ).toEqual(['script', 'nodes']);
    const submission = toSubmission(withPacking, {
      template: 'qlora',
      name: 'job-2',
      values: initialValues(withPacking, { script: 'a.py', nodes: 2 }),
      given: ['script', 'nodes'],
      overrides: { launcher: 'plain' }
    });
    expect(submission).toEqual({
      name: 'job-2',
      template: 'qlora',
      params: { script: 'a.py', nodes: 2 },
      overrides: { launcher: 'plain' }
    });
  });

  it("shows the server's effective values for untouched fields", () => {
    const steps = withPacking.params.find(p => p.name === 'max_steps')!;
    const packing = withPacking.params.find(p => p.name === 'packing')!;
    expect(effectiveText(steps, { max_steps: 7 })).toBe('7');
    expect(effectiveText(packing, { packing: true })).toBe('true');
    expect(effectiveText(steps, { max_steps: null })).toBe('');
    expect(effectiveText(steps, undefined)).toBe('');
  });
});

describe('server field errors', () => {
  it('maps each error to the field it concerns', () => {
    expect(fieldForError('params.nodes', template)).toBe('nodes');
    expect(fieldForError('params.env.BAD-NAME', template)).toBe('env');
    expect(fieldForError('name', template)).toBe('name');
    expect(fieldForError('nodes', template)).toBe('nodes');
    expect(fieldForError('command', template)).toBe('script');
    expect(fieldForError('workdir', template)).toBeNull();
    expect(fieldForError('template', template)).toBeNull();
    expect(fieldForError(null, template)).toBeNull();
    expect(fieldForError('params.lora_r', null)).toBeNull();
  });
});

describe('names', () => {
  it('suggests a valid name from a script', () => {
    const name = suggestName(
      'project/My_Train.py',
      new Date(2026, 10, 30, 19, 5, 7)
    );
    expect(name).toBe('my-train-1130-190507');
    expect(validateName(name)).toBeNull();
    expect(validateName(suggestName('x/' + 'é'.repeat(60) + '.sh'))).toBeNull();
    expect(validateName(suggestName('a'.repeat(80) + '.py'))).toBeNull();
  });

  it('numbers a resubmission', () => {
    expect(nextName('train-1')).toBe('train-2');
    expect(nextName('train')).toBe('train-2');
    expect(nextName('train-1130-190507')).toBe('train-1130-190507-2');
  });
});

describe('resubmit', () => {
  const script: ITemplateInfo = {
    name: 'script',
    title: 'Script',
    description: '',
    params: []
  };
  const job = (spec: Partial<IJob['spec']>): IJob =>
    ({
      id: 'j1',
      name: 'train-1',
      state: 'FAILED',
      spec: { name: 'train-1', command: ['train.py'], ...spec }
    }) as IJob;

  it('reuses the template and its parameters', () => {
    expect(
      prefillFromJob(
        job({ template: 'qlora', params: { script: 'x.py', nodes: 2 } }),
        [template, script]
      )
    ).toEqual({ template: 'qlora', params: { script: 'x.py', nodes: 2 } });
  });

  it('fills the script template from a plain spec', () => {
    const prefill = prefillFromJob(
      job({
        command: ['run.py', '--lr', '1e-4', "it's"],
        nodes: 2,
        env: { A: '1' }
      }),
      [script]
    );
    expect(prefill?.template).toBe('script');
    expect(prefill?.params).toMatchObject({
      script: 'run.py',
      args: `--lr 1e-4 'it'"'"'s'`,
      nodes: 2,
      env: { A: '1' }
    });
    expect(prefillFromJob(job({}), [template])).toBeNull();
  });

  it('keeps what the form has no field for (launcher, workdir, kind, auto-resume)', () => {
    expect(
      prefillFromJob(
        job({
          template: 'qlora',
          params: { script: 'x.py' },
          overrides: { launcher: 'plain', workdir: 'w' }
        }),
        [template]
      )
    ).toEqual({
      template: 'qlora',
      params: { script: 'x.py' },
      overrides: { launcher: 'plain', workdir: 'w' }
    });
    const plain = prefillFromJob(
      job({
        command: ['train.py', '1'],
        workdir: 'proj',
        launcher: 'torchrun',
        kind: 'PyTorchJob',
        namespace: 'team',
        auto_resume: true,
        max_retries: 2
      }),
      [script]
    );
    expect(plain?.params.script).toBe('proj/train.py');
    expect(plain?.overrides).toEqual({
      launcher: 'torchrun',
      kind: 'PyTorchJob',
      namespace: 'team',
      auto_resume: true,
      max_retries: 2
    });
  });

  it('quotes arguments only when needed', () => {
    expect(shellQuote('a/b.py')).toBe('a/b.py');
    expect(shellQuote('two words')).toBe("'two words'");
  });
});
