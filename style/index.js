import '@xterm/xterm/css/xterm.css';
import 'uplot/dist/uPlot.min.css';
import './base.css';
import './gpu.css';
import './queue.css';
import './watchdog.css';
import './apply.css';
import './compare.css';
