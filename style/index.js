import '@xterm/xterm/css/xterm.css';
import 'uplot/dist/uPlot.min.css';
import './base.css';
import './queue.css';
import './watchdog.css';
import './compare.css';
