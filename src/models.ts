/**
 * The REST API's JSON shapes, by the names the panel uses. Every one is the OpenAPI document's
 * (docs/openapi.json, built from jupyter_hyperpod's pydantic models): src/generated/openapi.ts is
 * generated from it by openapi-typescript (`jlpm build:models`; `jlpm check:models` fails on a
 * difference), so a field added on the server reaches these types once, by regeneration.
 */
import type { components, paths } from './generated/openapi';

type Schemas = components['schemas'];

export type IGpuCount = Schemas['GpuCount'];
export type INode = Schemas['Node'];
export type Health = INode['health'];
export type ICapabilities = Schemas['Capabilities'];
export type RenderFormat = ICapabilities['render_format'];
export type IAwsCluster = Schemas['AwsCluster'];
export type IAwsClusterList = Schemas['AwsClusterList'];
export type IAwsConnectRequest = Schemas['AwsConnectRequest'];
export type IFileSystemInfo = Schemas['FileSystemInfo'];
export type IClusterInfo = Schemas['ClusterInfo'];
export type Orchestrator = IClusterInfo['orchestrator'];
export type IWatchedResource = Schemas['WatchedResource'];
export type IWatchCacheStatus = Schemas['WatchCacheStatus'];
export type IFileEntry = Schemas['FileEntry'];
export type FileType = IFileEntry['type'];
export type IFileListing = Schemas['FileListing'];
export type FileSort = NonNullable<
  NonNullable<paths['/files']['get']['parameters']['query']>['sort']
>;
export type ITemplateParam = Schemas['TemplateParam'];
export type ParamType = ITemplateParam['type'];
export type ITemplateInfo = Schemas['TemplateInfo'];
/** A job's spec as the server sends it (every field present). */
export type IJobSpec = Schemas['JobSpec-Output'];
/** A spec to submit: fields with a server default may be left out. */
export type IJobSpecInput = Schemas['JobSpec-Input'];
export type IWatchdogSpec = Schemas['WatchdogSpec-Output'];
export type ITemplateSubmission = Schemas['TemplateSubmission'];
export type Submission = IJobSpecInput | ITemplateSubmission;
export type IRendered = Schemas['Rendered'];
export type IRankFault = Schemas['RankFault'];
export type IRankInfo = Schemas['RankInfo'];
export type IJob = Schemas['Job'];
export type JobState = IJob['state'];
export type IRankClock = Schemas['RankClock'];
export type IStraggler = Schemas['Straggler'];
export type IJobWatchdog = Schemas['JobWatchdog'];
export type IOperatorVerdict = Schemas['OperatorVerdict'];
/** The answer of `POST jobs/apply`: what is (or would be) sent, every change marked. */
export type IAppliedFile = Schemas['AppliedFile'];
export type IFileChange = Schemas['FileChange'];
export type IFileProblem = Schemas['FileProblem'];
export type IStackFrame = Schemas['StackFrame'];
export type IThreadStack = Schemas['ThreadStack'];
export type IRankStack = Schemas['RankStack'];
export type IStackDump = Schemas['StackDump'];
export type IJobProgress = Schemas['JobProgress'];
export type IForgottenJob = Schemas['ForgottenJob'];
export type IJobList = Schemas['JobList'];
/** A chain (#24 item 4): every job linked to one by `after` (`GET jobs/{id}/chain`). */
export type IJobChain = Schemas['JobChain'];
export type IChainLink = Schemas['ChainLink'];
/** What `POST chains` and `POST jobs/{id}/resume` started, in chain order. */
export type IChainSubmitted = Schemas['ChainSubmitted'];
/** A sweep (#24 item 3): one request, a group of jobs (`POST sweeps`, `GET sweeps/{id}`). */
export type ISweepRequest = Schemas['SweepRequest'];
export type ISweep = Schemas['Sweep'];
/** A group row: counts per state, progress, the best member so far. */
export type ISweepSummary = Schemas['SweepSummary'];
export type ISweepList = Schemas['SweepList'];
export type ISweepTag = Schemas['SweepTag-Output'];
export type ILogSnapshot = Schemas['LogSnapshot'];
export type IMetricPoint = Schemas['MetricPoint'];
export type IMlflowRunInfo = Schemas['MlflowRunInfo'];
export type IJobMetrics = Schemas['JobMetrics'];
export type IEvaluationMetrics = Schemas['EvaluationMetrics'];
export type IRougeComparison = Schemas['RougeComparison'];
/** `GET jobs/{a}/diff/{b}`: what differs between two jobs (spec, configs, code, packages). */
export type IJobDiff = Schemas['JobDiff'];
export type IValueChange = Schemas['ValueChange'];
export type IConfigChange = Schemas['ConfigChange'];
export type ICodeDiff = Schemas['CodeDiff'];
export type ICodeFileChange = Schemas['CodeFileChange'];
export type IEnvironmentDiff = Schemas['EnvironmentDiff'];
export type IPackageChange = Schemas['PackageChange'];
/** `GET compare?ids=`: two or more jobs side by side, one column each. */
export type IJobComparison = Schemas['JobComparison'];
export type IComparedJob = Schemas['ComparedJob'];
export type IErrorBody = Schemas['ErrorBody'];
export type IQueueJob = Schemas['QueueJob'];
export type IQueuePage = Schemas['QueuePage'];
export type IQueueLogs = Schemas['QueueLogs'];
export type IQueueQuery = NonNullable<
  paths['/queue']['get']['parameters']['query']
>;

export const FINISHED_STATES: ReadonlyArray<JobState> = [
  'SUCCEEDED',
  'FAILED',
  'CANCELLED'
];

export function isFinished(state: JobState): boolean {
  return FINISHED_STATES.includes(state);
}
