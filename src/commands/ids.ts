/** The commands the extension adds, by id (other extensions and the tests call them). */
export namespace CommandIDs {
  export const open = 'hyperpod:open';
  export const showView = 'hyperpod:show-view';
  export const refresh = 'hyperpod:refresh';
  export const submitFile = 'hyperpod:submit-file';
  export const submitBrowserFile = 'hyperpod:submit-browser-file';
  export const openJob = 'hyperpod:open-job';
  export const cancelJob = 'hyperpod:cancel-job';
  export const submitInMain = 'hyperpod:submit-in-main-area';
  /** Args: ids (2 to 10 job ids), names (optional, for the tab's title). */
  export const compareJobs = 'hyperpod:compare-jobs';
}
