// A whole training platform on ACK in TypeScript, from the platform's component package: the
// repository's dev stack (stacks/Pulumi.dev.yaml) as one TrainingPlatform, with the registry's
// password a secret of this program:
//   pulumi package add <path or git URL of this repository>/package
//   pulumi config set alicloud:region cn-hangzhou
//   pulumi config set --secret registryPassword <password of ml-pull@1234567890123456>
//   pulumi up
import * as pulumi from "@pulumi/pulumi";
import * as platform from "@pulumi/ack-training-platform";

const config = new pulumi.Config();

const training = new platform.TrainingPlatform("platform", {
    platform: {
        network: {
            vpcCidr: "192.168.0.0/16",
            vswitches: [
                { zoneId: "cn-hangzhou-k", cidr: "192.168.0.0/20" },
                { zoneId: "cn-hangzhou-j", cidr: "192.168.16.0/20" },
            ],
            podCidr: "172.20.0.0/16",
            serviceCidr: "172.21.0.0/20",
        },
        cluster: { name: "training-dev", deletionProtection: true, apiServer: { public: true } },
        gpuPool: {
            name: "gpu",
            instanceTypes: ["ecs.gn7i-c8g1.2xlarge", "ecs.gn7i-c16g1.4xlarge"],
            gpusPerNode: 1,
            spotStrategy: "SpotAsPriceGo",
            compensateWithOnDemand: true,
            minSize: 0,
            maxSize: 2,
        },
        storage: {
            nas: { fileSystemType: "standard", storageType: "Performance" },
            data: { claimName: "training-data", size: "500Gi" },
            output: { claimName: "training-output", size: "1Ti" },
        },
        registry: { edition: "personal", namespace: "ml", repository: "trainer", username: "ml-pull@1234567890123456" },
        training: { namespace: "training", gpuQuota: 2 },
        jobs: [
            {
                name: "mnist-dev",
                imageTag: "v0.1.0",
                cpu: "6",
                memory: "24Gi",
                trainer: { model: "cnn", epochs: 2, batchSize: 128, checkpointEvery: 200 },
            },
        ],
        monitoring: { prometheus: "arms", alerts: { noProgressMinutes: 15, restartsPerHour: 3 } },
    },
    registryPassword: config.requireSecret("registryPassword"),
});

export const jobs = training.jobs;
export const jobDefaults = training.jobDefaults;
