//! Topic routes from the name server (`GET_ROUTEINFO_BY_TOPIC`): the writable queues of master
//! brokers, refreshed on failure; topic creation on the brokers (`UPDATE_AND_CREATE_TOPIC`).
