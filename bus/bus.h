/* bus.h — umbrella for the message bus: protocol constants shared by all planes. */
#ifndef KVT_BUS_H
#define KVT_BUS_H

#define BUS_PROTOCOL_VERSION 1

#endif
