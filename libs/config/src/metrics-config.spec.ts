import { ConfigError, loadConfig } from '@libs/config';

describe('metrics settings', () => {
  it('are on by default, on port 9464 of HOST, named hostname:pid', () => {
    const c = loadConfig({ HOST: '127.0.0.1' });
    expect(c.metrics).toEqual({ host: '127.0.0.1', port: 9464 });
    expect(c.instanceId).toMatch(new RegExp(`:${process.pid}$`));
  });

  it('read METRICS, METRICS_PORT, METRICS_HOST and HOST_INSTANCE_ID', () => {
    expect(loadConfig({ METRICS: 'off' }).metrics).toBeNull();
    const c = loadConfig({ METRICS_PORT: '9100', METRICS_HOST: '10.0.0.1', HOST_INSTANCE_ID: 'host-a' });
    expect(c.metrics).toEqual({ host: '10.0.0.1', port: 9100 });
    expect(c.instanceId).toBe('host-a');
  });

  it('name each bad variable and its rule', () => {
    let error: unknown;
    try {
      loadConfig({ METRICS: 'yes', METRICS_PORT: '70000', HOST_INSTANCE_ID: 'a b' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.split('=')[0]).sort()).toEqual(['HOST_INSTANCE_ID', 'METRICS', 'METRICS_PORT']);
    expect(problems.join('\n')).toContain('HOST_INSTANCE_ID must be 1-128 letters');
  });
});
