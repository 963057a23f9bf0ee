"""MQTT brokers the pipeline runs on: the embedded amqtt broker and a launched Mosquitto."""
