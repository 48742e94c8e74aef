/** The Submit form's "Run after": pick jobs the new job waits for (a chain, #24 item 4). */
import * as React from 'react';

import { choiceLabel, runAfterChoices } from '../../chains';
import { IJob } from '../../models';

export function RunAfterField(props: {
  jobs: IJob[] | null;
  after: string[];
  afterAny: boolean;
  error?: string;
  onChange: (after: string[], afterAny: boolean) => void;
}): JSX.Element {
  const choices = runAfterChoices(props.jobs);
  const known = new Set(choices.map(job => job.id));
  // A chosen job that left the list (it failed meanwhile) stays shown, so it can be unpicked.
  const missing = props.after.filter(id => !known.has(id));
  return (
    <div className="jp-hyperpod-Field jp-hyperpod-RunAfter">
      <label htmlFor="jp-hyperpod-after">Run after</label>
      <select
        id="jp-hyperpod-after"
        className="jp-mod-styled"
        multiple
        size={Math.min(5, Math.max(2, choices.length + missing.length))}
        value={props.after}
        title="The job starts once these succeeded; one that fails cancels it with the reason"
        onChange={event => {
          const picked = Array.from(event.target.selectedOptions).map(
            option => option.value
          );
          props.onChange(picked, props.afterAny);
        }}
      >
        {missing.map(id => (
          <option key={id} value={id} title={id}>
            {id}
          </option>
        ))}
        {choices.map(job => (
          <option key={job.id} value={job.id} title={choiceLabel(job)}>
            {choiceLabel(job)}
          </option>
        ))}
      </select>
      {props.after.length > 0 && (
        <label className="jp-hyperpod-RunAfter-any">
          <input
            type="checkbox"
            checked={props.afterAny}
            onChange={event =>
              props.onChange(props.after, event.target.checked)
            }
          />{' '}
          Start even if they fail (any end)
        </label>
      )}
      {props.error && (
        <div className="jp-hyperpod-Field-error" role="alert">
          {props.error}
        </div>
      )}
      {choices.length === 0 && props.after.length === 0 && (
        <div className="jp-hyperpod-Field-help">
          No job to wait for: submit the first link of a chain, then pick it
          here.
        </div>
      )}
    </div>
  );
}
