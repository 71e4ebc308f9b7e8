/** Stage connectors (docs/design.md §9, docs/disaggregation.md): one interface, three transports. */
export { type ConnectorState, type StageReceiver, type StageSender } from './stage-connector';
export { createInProcessConnector, type InProcessConnectorOptions } from './in-process';
export { connectTcp, listenTcp, type TcpConnectOptions, type TcpListenOptions } from './tcp';
export { connectShm, defaultShmDir, listenShm, type ShmConnectOptions, type ShmListenOptions } from './shm';
export { SocketStageReceiver, type ReceiverFault } from './socket-receiver';
export { SocketStageSender } from './socket-sender';
